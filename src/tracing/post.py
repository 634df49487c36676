"""One OTLP/HTTP export: POST the encoded request, retrying what may pass later.

What the SDK's OTLP/HTTP exporter does with the same variables
(:func:`exai.tracing.setup.post_options` reads them): the body as
``application/x-protobuf``, gzip- or deflate-compressed on request, with the
collector's headers, its CA certificate and a client certificate for mTLS; a
refused connection, 429, 502, 503 and 504 are retried with exponential
backoff (with jitter, or the ``Retry-After`` the collector sent) until the
export's deadline; any other answer but 2xx fails the batch at once.

A post goes over one kept ``http.client`` connection: ``requests`` cost
about 400 µs of the span writer's CPU a post (a batch of 512 spans), the
standard library's connection about 70. The certificates trusted are what
``requests`` trusts (``certifi``'s bundle, or the collector's CA file when
one is set). A collector that the environment's proxy variables send through
a proxy (``HTTPS_PROXY``, ``NO_PROXY``...) is posted to with ``requests``,
which speaks to proxies of every kind.
"""

from __future__ import annotations

import gzip
import http.client
import random
import select
import socket
import ssl
import time
import urllib.request
import zlib
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = ["PostOptions", "Poster"]

_RETRYABLE: Final = frozenset({429, 502, 503, 504})
_MAX_TRIES: Final = 6
# Failures requests counts as a connection error, which is retried: the collector
# closed or refused the connection, or its TLS did not pass.
_UNREACHED: Final = (ConnectionError, http.client.RemoteDisconnected, socket.gaierror,
                     ssl.SSLError)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PostOptions:
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 10.0
    compression: str = "none"  # none, gzip, deflate
    certificate: str | None = None  # CA bundle for the collector's certificate
    client_certificate: str | None = None
    client_key: str | None = None


class _Refused(Exception):
    """The collector could not be reached (retryable, as a refused connection)."""


class _Failed(Exception):
    """The post failed in a way a retry would not mend (a timeout, a bad answer)."""


class Poster:
    def __init__(self, options: PostOptions, user_agent: str) -> None:
        self.options = options
        self._headers = {"Content-Type": "application/x-protobuf", "User-Agent": user_agent,
                         **options.headers}  # fmt: skip
        if options.compression != "none":
            self._headers["Content-Encoding"] = options.compression
        url = urlsplit(options.url)
        # Not an http(s) URL: every post fails with this (setup has checked the URL).
        self._bad = None if url.scheme in ("http", "https") and url.hostname else "bad URL"
        self._host, self._https = url.hostname or "", url.scheme == "https"
        self._port = url.port or (443 if self._https else 80)
        self._target = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self._connection: http.client.HTTPConnection | None = None
        self._session: Any = None  # a requests.Session, for a collector behind a proxy
        if _proxied(url.scheme, self._host):
            import requests

            self._session = requests.Session()
        self.last_error: str | None = None

    def post(self, body: bytes, deadline: float) -> bool:
        """Send ``body`` by ``deadline`` (``time.monotonic()``); True if the collector took it."""
        if self.options.compression == "gzip":
            body = gzip.compress(body, compresslevel=6)
        elif self.options.compression == "deflate":
            body = zlib.compress(body)
        if self._bad is not None:
            self.last_error = self._bad
            return False
        send = self._send if self._session is None else self._send_by_requests
        for attempt in range(_MAX_TRIES):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            retry_after: float | None = None
            try:
                status, retry_text = send(body, remaining)
            except _Refused as exc:
                self.last_error = str(exc)
                retryable = True
            except _Failed as exc:
                self.last_error = str(exc)
                return False
            else:
                if 200 <= status < 300:
                    self.last_error = None
                    return True
                self.last_error = f"HTTP {status}"
                retryable = status in _RETRYABLE
                retry_after = _retry_after(retry_text)
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

    def _send(self, body: bytes, timeout_s: float) -> tuple[int, str | None]:
        """One POST on the kept connection: the status and the ``Retry-After`` header."""
        connection = self._connection
        if connection is None or connection.sock is None or _dropped(connection.sock):
            # Never used, or closed by the collector since the last post (an idle
            # timeout): checked before sending, as requests does, so a request is
            # never sent twice.
            if connection is not None:
                connection.close()
            connection = self._connection = self._connect(timeout_s)
        else:
            connection.sock.settimeout(timeout_s)
        try:
            connection.request("POST", self._target, body, self._headers)
            answer = connection.getresponse()
            answer.read()  # the whole answer, so the connection can be used again
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            if not isinstance(exc, _UNREACHED):
                raise _Failed(type(exc).__name__) from exc  # a timeout, a garbled answer
            raise _Refused(type(exc).__name__) from exc
        if answer.will_close:
            connection.close()
        return answer.status, answer.getheader("retry-after")

    def _connect(self, timeout_s: float) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection
        if self._https:
            connection = http.client.HTTPSConnection(self._host, self._port, timeout=timeout_s,
                                                     context=self._tls())  # fmt: skip
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=timeout_s)
        try:
            connection.connect()
        except (OSError, ssl.SSLError) as exc:  # refused, unreachable, a name not found
            connection.close()
            raise _Refused(type(exc).__name__) from exc
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def _tls(self) -> ssl.SSLContext:
        options = self.options
        if options.certificate:
            context = ssl.create_default_context(cafile=options.certificate)
        else:
            import certifi

            context = ssl.create_default_context(cafile=certifi.where())
        if options.client_certificate:
            context.load_cert_chain(options.client_certificate, options.client_key)
        return context

    def _send_by_requests(self, body: bytes, timeout_s: float) -> tuple[int, str | None]:
        import requests

        options = self.options
        cert: Any = None
        if options.client_certificate:
            cert = ((options.client_certificate, options.client_key)
                    if options.client_key else options.client_certificate)  # fmt: skip
        try:
            answer = self._session.post(options.url, data=body, headers=self._headers,
                                        timeout=timeout_s, verify=options.certificate or True,
                                        cert=cert)  # fmt: skip
        except requests.ConnectionError as exc:
            raise _Refused(type(exc).__name__) from exc
        except requests.RequestException as exc:
            raise _Failed(type(exc).__name__) from exc
        return answer.status_code, answer.headers.get("retry-after")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        if self._session is not None:
            self._session.close()


def _dropped(sock: socket.socket) -> bool:
    """Whether a kept connection was closed by the other end (readable while idle: its
    end, or bytes nobody asked for)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _proxied(scheme: str, host: str) -> bool:
    """Whether the environment sends requests to ``host`` through a proxy, as
    ``requests`` reads it (``<scheme>_proxy``, ``all_proxy``, ``no_proxy``)."""
    proxies = urllib.request.getproxies()
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(host)


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
