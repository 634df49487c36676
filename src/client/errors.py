"""What a call through :class:`~exai.client.ExaiClient` can fail with, besides a result
whose ``error`` the daemon filled in."""

from __future__ import annotations

from exai.protocol import ErrorInfo

__all__ = ["ClientError", "ConnectError", "HelloRefused", "RequestFailed"]


class ClientError(Exception):
    pass


class ConnectError(ClientError):
    """The daemon could not be reached."""


class HelloRefused(ClientError):
    """The daemon answered ``hello`` with ``ok: false`` (or closed with 4003)."""

    def __init__(self, error: ErrorInfo | None, close_code: int | None = None) -> None:
        message = error.message if error else f"closed with {close_code}"
        super().__init__(message)
        self.error = error
        self.close_code = close_code


class RequestFailed(ClientError):
    """The daemon answered a request with an ``error`` frame."""

    def __init__(self, error: ErrorInfo) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error
