"""Credentials masked out of URLs, wherever a URL appears in text.

Every URL setting may carry a credential: a password in its user information
(``postgresql://user:password@host/db``), a token as the user name
(``https://token@host``), or a key in its query (``?api_key=...``). HTTP and
database clients quote the URL they failed on in their exceptions, so the text
of an error can carry it too. :func:`mask_url_credentials` is the one function
that masks them; settings shown by ``exai config``, error messages
(:class:`exai.errors.ExaiError`), the log and the audit trail
(:class:`exai.audit.scrub.Scrubber`), ``/ready`` and the ``status`` tool all pass
their text through it.

:func:`mask_url` is stricter, for one URL given by a user that exai shows back
(a job's notification target): besides its user information it masks every
query value, whatever the parameter is called, since services put tokens in
parameters of any name (ntfy's ``?auth=``, ``?t=``, signed links). Depends on
nothing of ours.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit, urlunsplit

__all__ = ["MASK", "mask_url", "mask_url_credentials"]

MASK: Final = "****"

# scheme://userinfo@ : the user information runs to the last "@" before the path,
# query, fragment or the end of the URL (a password may hold a raw "@").
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)([^\s/?#@]*(?:@[^\s/?#@]*)*)@")
# ?name=value or &name=value, for names that say the value is a credential: ending
# in password, secret or token (sslpassword, access_token), or naming a key, a
# signature or auth as a word of their own (api_key, x-sig; not monkey, author).
_QUERY_SECRET = re.compile(
    r"([?&;](?:[A-Za-z0-9_\-]*(?:password|passwd|secret|token)"
    r"|(?:[A-Za-z0-9_\-]*[_\-])?(?:api[_\-]?key|apikey|key|pwd|signature|sig|auth|credentials?))"
    r"=)([^&#\s\"'<>]+)",
    re.IGNORECASE,
)


def _mask_userinfo(match: re.Match[str]) -> str:
    user, sep, _password = match.group(2).partition(":")
    shown = f"{user}:{MASK}" if sep else MASK  # a lone user name may be the token
    return f"{match.group(1)}{shown}@"


def mask_url_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``****``.

    ``http://user:pw@host/v1`` -> ``http://user:****@host/v1``;
    ``https://tok@host`` -> ``https://****@host``;
    ``https://host/?api_key=k&x=1`` -> ``https://host/?api_key=****&x=1``.
    """
    if "://" not in text:
        return text
    if "@" in text:
        text = _USERINFO.sub(_mask_userinfo, text)
    if "=" in text:
        text = _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, text)
    return text


def mask_url(url: str) -> str:
    """One URL with its user information, every query value (a bare query item
    too: it may be the token itself) and any fragment replaced by ``****``.

    ``https://u:p@host/topic?auth=tk&x=1`` -> ``https://u:****@host/topic?auth=****&x=****``.
    Text that does not parse as a URL is masked as :func:`mask_url_credentials` would.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return mask_url_credentials(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at:
        user, sep, _password = userinfo.partition(":")
        userinfo = f"{user}:{MASK}" if sep else MASK
    query = "&".join(
        f"{name}={MASK}" if sep else MASK
        for name, sep, _value in (item.partition("=") for item in parts.query.split("&") if item)
    )
    fragment = MASK if parts.fragment else ""
    netloc = f"{userinfo}{at}{hostport}"
    return mask_url_credentials(urlunsplit((parts.scheme, netloc, parts.path, query, fragment)))
