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
``jobs`` tool, never silently dropped. Signing and the ntfy text are pure
functions here; :func:`send` does the one HTTP request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any
from urllib.parse import urlsplit

import httpx

from exai.jobs.base import Notification
from exai.redact import mask_url_credentials

__all__ = [
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
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


def host_refused(url: str, hosts: list[str]) -> str | None:
    """Why ``url`` may not be notified under ``EXAI_JOBS_NOTIFY_HOSTS``; None when it may."""
    host = (urlsplit(url).hostname or "").lower()
    if not hosts or host in {h.lower() for h in hosts}:
        return None
    return f"notification host {host!r} is not in EXAI_JOBS_NOTIFY_HOSTS"


async def send(
    client: httpx.AsyncClient, note: Notification, secret: str | None, now: float
) -> str | None:
    """Send one notification; None when delivered, else why not (credentials masked)."""
    try:
        if note.kind == "ntfy":
            headers = {"Title": f"exai job {note.payload.get('job_name', '')}"[:200],
                       "Tags": "robot"}  # fmt: skip
            if note.payload.get("thread_url"):  # ntfy opens it when the notification is tapped
                headers["Click"] = str(note.payload["thread_url"])
            response = await client.post(
                note.url, content=ntfy_text(note.payload).encode(), headers=headers
            )
        else:
            if not secret:
                return "EXAI_JOBS_WEBHOOK_SECRET is not set: webhooks are not sent unsigned"
            body = json.dumps(note.payload, separators=(",", ":"), sort_keys=True).encode()
            stamp = int(now)
            response = await client.post(
                note.url, content=body,
                headers={"Content-Type": "application/json", TIMESTAMP_HEADER: str(stamp),
                         SIGNATURE_HEADER: sign(secret, stamp, body)},
            )  # fmt: skip
    except httpx.HTTPError as exc:
        return mask_url_credentials(f"{type(exc).__name__}: {exc}")[:500]
    if 200 <= response.status_code < 300:
        return None
    return f"HTTP {response.status_code}"
