"""How the command line reaches a daemon, and what it says when it cannot.

:func:`target` takes the URL and token from the options or the settings and
checks the URL before anything connects; :func:`explain` turns a failed
connection into lines that name the mistake and the next step: nothing
listening (start it), a proxy with no daemon behind it (a 502, 503 or 504 that
exai did not send), exai's HTTP port instead of its WebSocket port, a token
missing or refused (where tokens come from).
"""

from __future__ import annotations

import argparse
import json
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from exai.cli.common import fail, load_or_exit
from exai.settings import Settings

__all__ = ["Target", "explain", "target"]

_GATEWAY_STATUSES = (502, 503, 504)
_TOKEN_SOURCES = ("EXAI_WS_TOKEN (in the environment, ./.env or ~/.config/exai/env) or "
                  "--token")  # fmt: skip


class Target:
    """Where a command connects: the daemon's URL, the token, and the settings they came from."""

    def __init__(self, url: str, token: str | None, settings: Settings) -> None:
        self.url = url
        self.token = token
        self.settings = settings

    def ws_url(self) -> str:
        """The WebSocket URL the settings name (what ``--url`` should have been)."""
        s = self.settings
        return f"ws://{_host(s.ws_host)}:{s.ws_port}"


def target(args: argparse.Namespace) -> Target:
    """The daemon the options name, or the settings' own; exits 2 on a URL that cannot be one."""
    settings = load_or_exit()
    token = getattr(args, "token", None) or (
        settings.ws_token.get_secret_value() if settings.ws_token else None
    )
    url = getattr(args, "url", None) or f"ws://{_host(settings.ws_host)}:{settings.ws_port}"
    found = Target(url, token, settings)
    problem = _url_problem(found)
    if problem is not None:
        fail(problem)
    return found


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _url_problem(t: Target) -> str | None:
    parts = urlsplit(t.url)
    if parts.scheme in ("ws", "wss") and parts.hostname:
        return None
    if parts.scheme in ("http", "https") and parts.hostname:
        port = parts.port
        if port is not None and port == t.settings.http_port:
            return (
                f"--url {t.url} is exai's HTTP port (EXAI_HTTP_PORT: /mcp and /v1); "
                f"exai call and exai tools speak WebSocket: use {t.ws_url()} (EXAI_WS_PORT)"
            )
        scheme = "wss" if parts.scheme == "https" else "ws"
        return (f"--url {t.url} is an HTTP URL; exai speaks WebSocket here: use "
                f"{scheme}://{parts.netloc}{parts.path}")  # fmt: skip
    return f"--url {t.url!r} is not a WebSocket URL; expected ws://HOST:PORT, e.g. {t.ws_url()}"


def _is_exai_http(t: Target, server: str) -> bool:
    """Whether the URL that refused the WebSocket handshake is exai's HTTP listener: its
    port is EXAI_HTTP_PORT, or it says so (the ``Server`` header of its ``/health``; a
    refused upgrade does not carry it)."""
    parts = urlsplit(t.url)
    if parts.port is not None and parts.port == t.settings.http_port:
        return True
    if server.startswith("exai/"):
        return True
    import urllib.request

    scheme = "https" if parts.scheme == "wss" else "http"
    try:
        with urllib.request.urlopen(f"{scheme}://{parts.netloc}/health", timeout=3) as answer:
            return str(answer.headers.get("server", "")).startswith("exai/")
    except (OSError, ValueError):
        return False


def _answered(response: Any, t: Target) -> str:
    """What an HTTP answer instead of a WebSocket handshake means.

    exai's WebSocket port refuses an upgrade it cannot take with 503 or 429 and a JSON
    ``error``; a 502, 503 or 504 without it comes from a proxy in front of a daemon that
    is not there. Anything else is another server: most likely exai's HTTP port.
    """
    status = response.status_code
    refusal = _exai_refusal(response.body)
    if refusal is not None:
        return f"the daemon at {t.url} refused the connection (HTTP {status}): {refusal}"
    if status in _GATEWAY_STATUSES:
        reason = HTTPStatus(status).phrase
        return (f"{t.url} answered HTTP {status} {reason}: a proxy or load balancer listens "
                "there with no daemon behind it that answers; start the daemon it forwards "
                "to (`exai serve`), or check the proxy's backends")  # fmt: skip
    if _is_exai_http(t, response.headers.get("server", "")):
        return (f"{t.url} is exai's HTTP port (EXAI_HTTP_PORT: /mcp and /v1), which "
                f"answered HTTP {status}; the WebSocket port is EXAI_WS_PORT: "
                f"{t.ws_url()}")  # fmt: skip
    return (f"{t.url} answered HTTP {status} instead of a WebSocket handshake: is it "
            f"exai's WebSocket port (EXAI_WS_PORT, {t.ws_url()})?")  # fmt: skip


def _exai_refusal(body: bytes | None) -> str | None:
    """The ``error`` of the JSON body exai's WebSocket port refuses an upgrade with."""
    try:
        data = json.loads(body or b"")
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    return " ".join(error.split()) if isinstance(error, str) and error else None


def explain(exc: BaseException, t: Target) -> list[str]:
    """What to tell the user about a connection that failed with ``exc``."""
    from websockets.exceptions import InvalidStatus

    from exai.client import HelloRefused

    if isinstance(exc, HelloRefused):
        reason = str(exc)
        if exc.error is not None and exc.error.code != "UNAUTHORIZED":
            return [f"the daemon at {t.url} refused the connection: {exc.error.code}: {reason}"]
        if t.token is None:
            return [f"the daemon at {t.url} wants a token ({reason}): set {_TOKEN_SOURCES}"]
        return [
            f"the daemon at {t.url} refused the token ({reason}): give the daemon's token, "
            f"or a JWT signed with its EXAI_JWT_SECRET, in {_TOKEN_SOURCES}"
        ]
    cause = exc.__cause__
    if isinstance(cause, InvalidStatus):
        return [_answered(cause.response, t)]
    if isinstance(cause, ConnectionRefusedError):
        return [f"cannot reach exai at {t.url}: nothing is listening there; start the daemon "
                "with `exai serve` (or `make run`), or point --url at one"]  # fmt: skip
    if isinstance(cause, OSError | TimeoutError):
        return [f"{exc}; is the daemon running there? `exai serve` starts one"]
    return [str(exc)]
