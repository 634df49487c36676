"""One OTLP/HTTP export: POST the encoded request, retrying what may pass later.

What the SDK's OTLP/HTTP exporter does with the same variables
(:func:`exai.tracing.setup.post_options` reads them): the body as
``application/x-protobuf``, gzip- or deflate-compressed on request, with the
collector's headers, its CA certificate and a client certificate for mTLS; a
refused connection, 429, 502, 503 and 504 are retried with exponential
backoff (with jitter, or the ``Retry-After`` the collector sent) until the
export's deadline; any other answer but 2xx fails the batch at once.
"""

from __future__ import annotations

import gzip
import random
import time
import zlib
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Final

import requests

__all__ = ["PostOptions", "Poster"]

_RETRYABLE: Final = frozenset({429, 502, 503, 504})
_MAX_TRIES: Final = 6


@dataclass(frozen=True, slots=True)
class PostOptions:
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    compression: str = "none"  # none, gzip, deflate
    certificate: str | None = None  # CA bundle for the collector's certificate
    client_certificate: str | None = None
    client_key: str | None = None


class Poster:
    def __init__(self, options: PostOptions, user_agent: str) -> None:
        self.options = options
        self._session = requests.Session()
        self._headers = {"Content-Type": "application/x-protobuf", "User-Agent": user_agent,
                         **options.headers}  # fmt: skip
        if options.compression != "none":
            self._headers["Content-Encoding"] = options.compression
        self._verify: Any = options.certificate or True
        self._cert: Any = None
        if options.client_certificate:
            self._cert = ((options.client_certificate, options.client_key)
                          if options.client_key else options.client_certificate)  # fmt: skip
        self.last_error: str | None = None

    def post(self, body: bytes, deadline: float) -> bool:
        """Send ``body`` by ``deadline`` (``time.monotonic()``); True if the collector took it."""
        if self.options.compression == "gzip":
            body = gzip.compress(body, compresslevel=6)
        elif self.options.compression == "deflate":
            body = zlib.compress(body)
        for attempt in range(_MAX_TRIES):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            retry_after: float | None = None
            try:
                answer = self._session.post(self.options.url, data=body, headers=self._headers,
                                            timeout=remaining, verify=self._verify,
                                            cert=self._cert)  # fmt: skip
            except requests.ConnectionError as exc:
                self.last_error = f"{type(exc).__name__}"
                retryable = True
            except requests.RequestException as exc:
                self.last_error = f"{type(exc).__name__}"
                return False
            else:
                if answer.ok:
                    self.last_error = None
                    return True
                self.last_error = f"HTTP {answer.status_code}"
                retryable = answer.status_code in _RETRYABLE
                retry_after = _retry_after(answer.headers.get("retry-after"))
            if not retryable:
                return False
            # A refused connection is tried again at once, once; then backoff.
            wait = (
                0.0
                if attempt == 0 and retry_after is None
                else (
                    retry_after
                    if retry_after is not None
                    else 2**attempt * random.uniform(0.8, 1.2)
                )
            )
            if wait > deadline - time.monotonic():
                return False
            time.sleep(wait)
        return False

    def close(self) -> None:
        self._session.close()


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
