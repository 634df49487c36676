"""Notifications of a job's runs: ntfy, and a generic webhook signed with HMAC-SHA256.

* **ntfy**: a POST of plain text to the topic URL (``https://ntfy.sh/my-topic`` or a
  self-hosted server), with a ``Title`` header; the text names the job, the
  outcome, the thread's id and its link in the console (``thread_url``, also
  ntfy's ``Click`` header, so tapping the notification opens the thread).
* **webhook**: a POST of the JSON payload with ``X-Exai-Timestamp`` (Unix
  seconds) and ``X-Exai-Signature: sha256=<hex>``, the HMAC-SHA256, keyed by
  ``EXAI_JOBS_WEBHOOK_SECRET``, of ``<timestamp>.<body>``. A receiver recomputes
  it over the raw body, compares in constant time and rejects old timestamps.

A notification is stored before it is sent (:meth:`JobStore.add_notification`)
and tried again with backoff until it is delivered or its attempts run out;
then it is kept as ``undeliverable`` and shown by ``exai jobs show`` and the
``jobs`` tool, never silently dropped. A target the address rule refuses
(:mod:`exai.jobs.targets`) is kept undelivered at once and never retried.
Signing and the ntfy text are pure functions here; :func:`send` resolves the
target once, checks the address it got and sends the one HTTP request to that
address, never following a redirect.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from exai.jobs.base import Notification
from exai.jobs.targets import NotifyRefusedError, Resolver, pin, system_resolve, url_refused
from exai.redact import mask_url_credentials

__all__ = [
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "Sent",
    "host_refused",
    "ntfy_text",
    "send",
    "sign",
    "verify",
]

SIGNATURE_HEADER = "X-Exai-Signature"
TIMESTAMP_HEADER = "X-Exai-Timestamp"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def verify(secret: str, timestamp: int, body: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


def ntfy_text(payload: dict[str, Any]) -> str:
    if "job_id" not in payload and payload.get("message"):  # not a job's (a budget alert)
        return str(payload["message"])
    status = payload.get("status", "?")
    lines = [f"exai job {payload.get('job_name')!r} ({payload.get('job_id')}): run {status}"]
    if payload.get("thread_url"):
        lines.append(f"open: {payload['thread_url']}")
    if payload.get("thread_id"):
        lines.append(f"thread: {payload['thread_id']} (continue with continuation_id)")
    if payload.get("error"):
        lines.append(f"error: {payload['error']}")
    elif payload.get("excerpt"):
        lines.append(str(payload["excerpt"]))
    return "\n".join(lines)


def host_refused(url: str, hosts: Sequence[str]) -> str | None:
    """Why ``url`` may not be notified, from the URL alone (``EXAI_JOBS_NOTIFY_HOSTS``,
    internal addresses written as numbers); None when it may. See :mod:`exai.jobs.targets`."""
    return url_refused(url, hosts)


@dataclass(frozen=True, slots=True)
class Sent:
    """What one attempt came to: ``error`` None when delivered; ``retry`` False when
    the target is refused, so trying again cannot help."""

    error: str | None = None
    retry: bool = True


async def send(
    client: httpx.AsyncClient,
    note: Notification,
    secret: str | None,
    now: float,
    *,
    hosts: Sequence[str] = (),
    resolve: Resolver = system_resolve,
) -> Sent:
    """Send one notification to the address its host resolves to now, once checked."""
    if note.kind != "ntfy" and not secret:
        return Sent("EXAI_JOBS_WEBHOOK_SECRET is not set: webhooks are not sent unsigned")
    try:
        target = await pin(note.url, hosts, resolve)
    except NotifyRefusedError as exc:
        return Sent(str(exc), retry=False)
    except (OSError, UnicodeError) as exc:
        return Sent(mask_url_credentials(f"cannot resolve the notification host: {exc}")[:500])
    headers = {"Host": target.host_header, "Connection": "close"}
    if note.kind == "ntfy":
        body = ntfy_text(note.payload).encode()
        title = note.payload.get("title") or f"exai job {note.payload.get('job_name', '')}"
        headers.update({"Title": str(title)[:200],
                        "Tags": "robot"})  # fmt: skip
        if note.payload.get("thread_url"):  # ntfy opens it when the notification is tapped
            headers["Click"] = str(note.payload["thread_url"])
    else:
        assert secret is not None
        body = json.dumps(note.payload, separators=(",", ":"), sort_keys=True).encode()
        stamp = int(now)
        headers.update({"Content-Type": "application/json", TIMESTAMP_HEADER: str(stamp),
                        SIGNATURE_HEADER: sign(secret, stamp, body)})  # fmt: skip
    # The name goes to TLS (SNI and the certificate check) while the connection goes
    # to the address checked above; each request closes its connection, so no pooled
    # connection made for one name ever carries another name's request.
    extensions = {"sni_hostname": target.sni} if target.sni else {}
    try:
        response = await client.post(target.url, content=body, headers=headers,
                                     extensions=extensions, follow_redirects=False)  # fmt: skip
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        return Sent(mask_url_credentials(f"{type(exc).__name__}: {exc}")[:500])
    if 200 <= response.status_code < 300:
        return Sent()
    if response.is_redirect:
        return Sent(f"HTTP {response.status_code} (redirects are not followed)")
    return Sent(f"HTTP {response.status_code}")
