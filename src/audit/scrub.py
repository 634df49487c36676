"""Removing secrets from event fields before they are stored anywhere.

Audit events leave the machine, so no API key, token or JWT may be in one.
:class:`Scrubber` returns a private deep copy of the fields (the caller may
keep mutating its own objects after ``emit``) in which

- a field whose name looks sensitive (``token``, ``api_key``, ``secret``,
  ``authorization``, ``password``, ``cookie`` ...) has its value masked unless
  the value is a number, a boolean or null: ``prompt_tokens=120`` is a count,
  not a credential;
- every configured secret value (tokens, JWT secret, provider keys, the
  Supabase key, passwords in connection strings) is masked wherever it occurs
  inside a string;
- anything shaped like a JWT or a bearer credential is masked, and so are the
  credentials in any URL (:func:`exai.redact.mask_url_credentials`);
- NUL characters and lone surrogates (what Python makes of undecodable bytes
  in a file name) become U+FFFD, since neither Postgres nor UTF-8 can store
  them.

The log uses the same scrubber (:mod:`exai.logs`), since its lines leave the
machine as often as audit events do.

Values that are not JSON types become strings here (models are dumped first),
so nothing can smuggle a secret through a ``__str__`` called later.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any, Final
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr

from exai.redact import MASK, mask_url_credentials

__all__ = ["MASK", "PLAIN_TYPES", "Scrubber", "secrets_from_settings"]

# The types of field values an emitter keeps as they are; anything else is copied
# through the scrubber at emit time, since the caller may change its own objects.
PLAIN_TYPES: Final = frozenset({str, int, float, bool, type(None)})

_MIN_SECRET_LEN: Final = 6
_MAX_DEPTH: Final = 32
_MAX_SAFE_NAMES: Final = 4096

_SENSITIVE_NAME = re.compile(
    r"(?:^|[_\-.])(?:api[_\-]?key|apikey|key|token|tokens|secret|secrets|password|passwd|pwd"
    r"|authorization|auth|bearer|cookie|cookies|jwt|credential|credentials|private[_\-]?key"
    r"|session[_\-]?key|signature)(?:$|[_\-.])",
    re.IGNORECASE,
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_CREDENTIAL_SHAPES = re.compile(
    r"eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"  # JWT (header is JSON)
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=\-]{8,}"
    r"|\bsk-[A-Za-z0-9_\-]{16,}"
)


@functools.lru_cache(maxsize=4096)
def _sensitive_name(name: str) -> bool:
    return bool(_SENSITIVE_NAME.search(name))


def _may_hold_credential(text: str) -> bool:
    """A cheap substring pre-check so most strings skip the credential regex."""
    return "eyJ" in text or "sk-" in text or "earer" in text or "EARER" in text


class Scrubber:
    """Masks secrets in event fields; built once from the known secret values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}
        self._secrets = sorted(unique, key=len, reverse=True)
        self._safe_names: set[str] = set()  # field names seen not to be sensitive

    def scrub(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """A scrubbed copy of ``fields``."""
        return self.scrub_many((fields,))[0]

    def scrub_many(self, batch: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Scrubbed copies of a batch of events; the flat ones are checked together.

        Most events are flat: strings, numbers and null under names that are not
        sensitive. A flat event is copied as it is, and the strings of all of them
        are checked once: if their concatenation holds no NUL, no known secret,
        no URL and none of the credential shapes' markers, :meth:`scrub_text`
        would return each of them unchanged. Only when it does are the flat
        events checked one by one; those that may change, and every event that
        is not flat, are scrubbed field by field.
        """
        copies: list[dict[str, Any] | None] = []
        strings: list[str] = []
        for fields in batch:
            copies.append(self._flat_copy(fields, strings))
        if strings and self._may_change("\n".join(strings)):
            for i, copy in enumerate(copies):
                if copy is not None and self._may_change(
                    "\n".join(v for v in copy.values() if type(v) is str)
                ):
                    copies[i] = None
        return [
            copy if copy is not None else self._scrub_fields(fields)
            for copy, fields in zip(copies, batch, strict=True)
        ]

    def _flat_copy(self, fields: Mapping[str, Any], strings: list[str]) -> dict[str, Any] | None:
        """A copy of a flat event, its strings added to ``strings``; None if not flat."""
        copy: dict[str, Any] = {}
        safe = self._safe_names
        for key, value in fields.items():
            kind = type(value)
            if kind is str:
                if key not in safe:
                    if type(key) is not str or _sensitive_name(key):
                        return None
                    if len(safe) < _MAX_SAFE_NAMES:
                        safe.add(key)
                strings.append(value)
            elif kind not in _FLAT_TYPES or type(key) is not str:
                return None
            copy[key] = value
        return copy

    def _scrub_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        return {str(key): self._field(str(key), value, 0) for key, value in fields.items()}

    def _may_change(self, text: str) -> bool:
        """Whether :meth:`scrub_text` could change ``text`` (or any part of it)."""
        if "\x00" in text or "://" in text or _may_hold_credential(text):
            return True
        if not text.isascii() and _SURROGATE.search(text):
            return True
        for secret in self._secrets:
            if secret in text:
                return True
        return False

    def scrub_text(self, text: str) -> str:
        if "\x00" in text:  # Postgres text and jsonb reject NUL; one would sink a whole batch
            text = text.replace("\x00", "\ufffd")
        if not text.isascii():  # a lone surrogate (an undecodable file name) is not UTF-8
            text = _SURROGATE.sub("\ufffd", text)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        text = mask_url_credentials(text)
        return _CREDENTIAL_SHAPES.sub(MASK, text) if _may_hold_credential(text) else text

    def _field(self, name: str, value: Any, depth: int) -> Any:
        if _sensitive_name(name) and not _is_plain_scalar(value):
            return MASK
        return self._value(value, depth)

    def _value(self, value: Any, depth: int) -> Any:
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self.scrub_text(value)
        if depth >= _MAX_DEPTH:
            return "<too deep>"
        if isinstance(value, Mapping):
            return {str(k): self._field(str(k), v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self._value(item, depth + 1) for item in value]
        if isinstance(value, SecretStr):
            return MASK
        if isinstance(value, BaseModel):
            return self._value(value.model_dump(mode="json"), depth + 1)
        if isinstance(value, enum.Enum):
            return self._value(value.value, depth + 1)
        if isinstance(value, datetime | date):
            return value.isoformat()
        if isinstance(value, bytes | bytearray | memoryview):
            return f"<{len(value)} bytes>"
        return self.scrub_text(str(value))


_FLAT_TYPES: Final = frozenset({str, int, float, bool, type(None)})


def _is_plain_scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float)


def secrets_from_settings(settings: Any) -> list[str]:
    """Every secret value a :class:`~exai.settings.Settings` holds.

    That is each ``SecretStr`` (and each token of ``principal=token`` lists),
    plus the password of any connection string, secret or not.
    """
    found: list[str] = []
    for name in type(settings).model_fields:
        value = getattr(settings, name, None)
        if isinstance(value, SecretStr):
            text = value.get_secret_value()
            found.append(text)
            found.extend(_parts(text))
        elif isinstance(value, str) and "://" in value:
            found.extend(_parts(value))
    return [secret for secret in found if secret]


def _parts(text: str) -> list[str]:
    parts: list[str] = []
    if "://" in text:
        try:
            password = urlsplit(text).password
        except ValueError:
            password = None
        if password:
            parts.append(password)
    if "=" in text and "://" not in text:
        for pair in text.split(","):
            _, _, token = pair.partition("=")
            parts.append(token.strip())
    return parts


def log_scrubber(settings: Any = None) -> Any:
    """The scrubbing step for :func:`exai.logs.configure_logging`: log lines are
    masked as audit events are, with ``settings``' secrets when given."""
    return Scrubber(secrets_from_settings(settings) if settings is not None else ()).scrub


def text_scrubber(settings: Any = None) -> Any:
    """The masking of one string, for :func:`exai.tracing.setup.configure`: spans'
    strings are masked as audit events and log lines are."""
    return Scrubber(secrets_from_settings(settings) if settings is not None else ()).scrub_text
