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

from exai.port import LimitsAdmin, Port
from exai.web.admin_api import error, json_body, operator_only

__all__ = ["routes"]

PREFIX = "/admin/limits"


def routes(core: Port) -> list[BaseRoute]:
    api = _LimitsApi(core)
    return [
        Route(PREFIX, api.handle(api.list), methods=["GET"]),
        Route(PREFIX + "/{principal}", api.handle(api.one), methods=["GET", "PATCH", "DELETE"]),
    ]


class _LimitsApi:
    def __init__(self, core: Port) -> None:
        self.core = core

    def handle(self, action: Any) -> Any:
        return operator_only(self.core, "limits", lambda core: core.limits_admin, action)

    async def list(self, request: Request, admin: LimitsAdmin, by: str) -> Response:
        return JSONResponse(await admin.list_limits())

    async def one(self, request: Request, admin: LimitsAdmin, by: str) -> Response:
        name = request.path_params["principal"]
        if request.method == "PATCH":
            changes = await json_body(request)
            return JSONResponse({"limits": await admin.set_limits(name, changes, by=by)})
        if request.method == "DELETE":
            if await admin.clear_limits(name, by=by):
                return JSONResponse({"cleared": True})
            return error(404, "NOT_FOUND", f"{name!r} has no limits of its own")
        listed = (await admin.list_limits())["principals"]
        found = [item for item in listed if item["principal"] == name]
        if not found:
            return error(404, "NOT_FOUND", f"{name!r} has no limits of its own")
        return JSONResponse({"limits": found[0]})
