"""``/admin/limits``: the operator's run-time limits per principal, as JSON (docs/cost.md).

Authenticated like ``/admin/keys`` (:mod:`exai.web.admin_keys`): by bearer token
only, and refused 403 unless the principal has the operator's view
(:func:`exai.auth.is_admin`).

==============================================  ===================================
``GET /admin/limits``                           ``{"defaults", "principals": [...]}``
``GET /admin/limits/{principal}``               ``{"limits"}`` (404: none of its own)
``PATCH /admin/limits/{principal}``             change ``{"budget", "rate",
                                                "models"}`` (only those given; null:
                                                the default) -> ``{"limits"}``
``DELETE /admin/limits/{principal}``            ``{"cleared": true}`` (404: none)
==============================================  ===================================

Errors are ``{"error": {"code", "message"}}``: 400 ``VALIDATION_ERROR``, 403
``FORBIDDEN``, 404 ``NOT_FOUND``, 503 ``UNAVAILABLE`` without a SQL store.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from exai.auth import is_admin
from exai.errors import ExaiError
from exai.port import LimitsAdmin, Port
from exai.web.asgi import headers_of, read_json
from exai.web.guard import principal_of
from exai.web.model_call import RequestRefused

__all__ = ["routes"]

PREFIX = "/admin/limits"
_MAX_BODY = 16 * 1024


def routes(core: Port) -> list[BaseRoute]:
    api = _LimitsApi(core)
    return [
        Route(PREFIX, api.handle(api.list), methods=["GET"]),
        Route(PREFIX + "/{principal}", api.handle(api.one), methods=["GET", "PATCH", "DELETE"]),
    ]


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class _LimitsApi:
    def __init__(self, core: Port) -> None:
        self.core = core

    def handle(self, action: Any) -> Any:
        async def run(request: Request) -> Response:
            principal = principal_of(request.scope)
            if not is_admin(principal, self.core.settings.admin_principals):
                return _error(403, "FORBIDDEN", "the limits are the operator's (exai:admin scope "
                              "or EXAI_ADMIN_PRINCIPALS)")  # fmt: skip
            admin = self.core.limits_admin
            if admin is None:
                return _error(503, "UNAVAILABLE", "this daemon keeps no limits (no SQL store)")
            try:
                response: Response = await action(request, admin, principal.name)
                return response
            except ExaiError as exc:
                return _error(400, exc.code.value, exc.message)
            except RequestRefused as exc:
                return _error(exc.status, "VALIDATION_ERROR", str(exc))
            except ValueError as exc:
                return _error(400, "VALIDATION_ERROR", str(exc))

        return run

    async def list(self, request: Request, admin: LimitsAdmin, by: str) -> Response:
        return JSONResponse(await admin.list_limits())

    async def one(self, request: Request, admin: LimitsAdmin, by: str) -> Response:
        name = request.path_params["principal"]
        if request.method == "PATCH":
            changes = await read_json(request.receive, headers_of(request.scope), _MAX_BODY)
            if not isinstance(changes, dict):
                raise ValueError("the request body must be a JSON object")
            return JSONResponse({"limits": await admin.set_limits(name, changes, by=by)})
        if request.method == "DELETE":
            if await admin.clear_limits(name, by=by):
                return JSONResponse({"cleared": True})
            return _error(404, "NOT_FOUND", f"{name!r} has no limits of its own")
        listed = (await admin.list_limits())["principals"]
        found = [item for item in listed if item["principal"] == name]
        if not found:
            return _error(404, "NOT_FOUND", f"{name!r} has no limits of its own")
        return JSONResponse({"limits": found[0]})
