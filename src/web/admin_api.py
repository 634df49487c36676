"""What the operator's JSON APIs (``/admin/keys``, ``/admin/limits``) share.

Both are authenticated by the guard from a bearer token only (never a cookie, so a
page on another site has nothing to forge), refuse a principal without the
operator's view (:func:`exai.auth.is_admin`) with 403 before anything is read, and
answer errors as ``{"error": {"code", "message"}}``: 400 ``VALIDATION_ERROR`` for
bad input, 503 ``UNAVAILABLE`` when the daemon has no SQL store to keep them in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from exai.auth import is_admin
from exai.errors import ExaiError
from exai.port import Port
from exai.web.asgi import headers_of, read_json
from exai.web.guard import principal_of
from exai.web.model_call import RequestRefused

__all__ = ["MAX_BODY", "error", "json_body", "operator_only"]

MAX_BODY = 16 * 1024

Action = Callable[[Request, Any, str], Awaitable[Response]]


def error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (at most :data:`MAX_BODY` bytes)."""
    value = await read_json(request.receive, headers_of(request.scope), MAX_BODY)
    if not isinstance(value, dict):
        raise ValueError("the request body must be a JSON object")
    return value


def operator_only(
    core: Port,
    what: str,
    admin_of: Callable[[Port], Any],
    action: Action,
    not_found: type[ExaiError] | None = None,
) -> Callable[[Request], Awaitable[Response]]:
    """``action(request, admin, operator's name)`` for an operator, ``admin`` being what
    ``admin_of(core)`` gives (None: no store keeps ``what``); its errors in the shared
    shape, ``not_found`` as 404."""

    async def run(request: Request) -> Response:
        principal = principal_of(request.scope)
        if not is_admin(principal, core.settings.admin_principals):
            return error(403, "FORBIDDEN", f"the {what} are the operator's (exai:admin scope "
                         "or EXAI_ADMIN_PRINCIPALS)")  # fmt: skip
        admin = admin_of(core)
        if admin is None:
            return error(503, "UNAVAILABLE", f"this daemon keeps no {what} (no SQL store)")
        try:
            return await action(request, admin, principal.name)
        except ExaiError as exc:
            status = 404 if not_found is not None and isinstance(exc, not_found) else 400
            return error(status, exc.code.value, exc.message)
        except RequestRefused as exc:
            return error(exc.status, "VALIDATION_ERROR", str(exc))
        except ValueError as exc:
            return error(400, "VALIDATION_ERROR", str(exc))

    return run
