"""``/admin/keys``: the operator's keys over HTTP, as JSON (docs/keys.md).

The guard authenticates every request here by its bearer token (never a cookie,
so a page on another site cannot make a browser act here: there is nothing to
forge), and a principal without the operator's view (:func:`exai.auth.is_admin`)
is refused 403 before anything is read. The answers are the keys' public form
(never a digest); ``POST /admin/keys`` and ``POST /admin/keys/{id}/rotate`` answer
the new key's token once, under ``token``.

=========================================  =========================================
``GET /admin/keys``                        ``{"keys": [...]}``, newest first
``POST /admin/keys``                       create: ``{"principal", "scopes", "budget",
                                           "rate", "models", "expires", "name",
                                           "note"}`` -> 201 ``{"token", "key"}``
``GET /admin/keys/{id}``                   ``{"key"}``
``PATCH /admin/keys/{id}``                 change ``{"scopes", "budget", "rate",
                                           "models", "expires", "name", "note"}``
                                           (only those given; null: the default)
                                           -> ``{"key"}``
``DELETE /admin/keys/{id}``, or
``POST /admin/keys/{id}/revoke``           ``{"key"}``, revoked
``POST /admin/keys/{id}/rotate``           201 ``{"token", "key", "replaces"}``
``POST /admin/revoked-jtis``               ``{"jti", "note"}`` -> ``{"jti", "added"}``
=========================================  =========================================

Errors are ``{"error": {"code", "message"}}``: 400 ``VALIDATION_ERROR`` for bad
input, 404 for an unknown key, 403 ``FORBIDDEN`` for a non-operator, 503
``UNAVAILABLE`` when the daemon keeps no keys (no SQL store).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from exai.auth import is_admin
from exai.errors import ExaiError
from exai.keys import KeyAdmin, KeyNotFoundError
from exai.port import Port
from exai.web.asgi import headers_of, read_json
from exai.web.guard import principal_of
from exai.web.model_call import RequestRefused

__all__ = ["routes"]

PREFIX = "/admin/keys"
_MAX_BODY = 16 * 1024


def routes(core: Port) -> list[BaseRoute]:
    api = _KeysApi(core)
    return [
        Route(PREFIX, api.handle(api.list_or_create), methods=["GET", "POST"]),
        Route(PREFIX + "/{key_id}", api.handle(api.one), methods=["GET", "PATCH", "DELETE"]),
        Route(PREFIX + "/{key_id}/revoke", api.handle(api.revoke), methods=["POST"]),
        Route(PREFIX + "/{key_id}/rotate", api.handle(api.rotate), methods=["POST"]),
        Route("/admin/revoked-jtis", api.handle(api.revoke_jti), methods=["POST"]),
    ]


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class _KeysApi:
    def __init__(self, core: Port) -> None:
        self.core = core

    def handle(self, action: Any) -> Any:
        async def run(request: Request) -> Response:
            principal = principal_of(request.scope)
            if not is_admin(principal, self.core.settings.admin_principals):
                return _error(403, "FORBIDDEN", "the keys are the operator's (exai:admin scope "
                              "or EXAI_ADMIN_PRINCIPALS)")  # fmt: skip
            admin = self.core.key_admin
            if admin is None:
                return _error(503, "UNAVAILABLE", "this daemon keeps no keys (no SQL store)")
            try:
                response: Response = await action(request, admin, principal.name)
                return response
            except KeyNotFoundError as exc:
                return _error(404, exc.code.value, exc.message)
            except ExaiError as exc:
                return _error(400, exc.code.value, exc.message)
            except RequestRefused as exc:
                return _error(exc.status, "VALIDATION_ERROR", str(exc))
            except ValueError as exc:
                return _error(400, "VALIDATION_ERROR", str(exc))

        return run

    async def _body(self, request: Request) -> dict[str, Any]:
        value = await read_json(request.receive, headers_of(request.scope), _MAX_BODY)
        if not isinstance(value, dict):
            raise ValueError("the request body must be a JSON object")
        return value

    async def list_or_create(self, request: Request, admin: KeyAdmin, by: str) -> Response:
        if request.method == "GET":
            return JSONResponse({"keys": await admin.list_keys()})
        key, token = await admin.create_key(await self._body(request), by=by)
        return JSONResponse({"token": token, "key": key}, status_code=201)

    async def one(self, request: Request, admin: KeyAdmin, by: str) -> Response:
        key_id = request.path_params["key_id"]
        if request.method == "DELETE":
            return JSONResponse({"key": await admin.revoke_key(key_id, by=by)})
        if request.method == "PATCH":
            changes = await self._body(request)
            return JSONResponse({"key": await admin.update_key(key_id, changes, by=by)})
        found = [k for k in await admin.list_keys() if k["id"] == key_id]
        if not found:
            raise KeyNotFoundError(f"no key {key_id!r}")
        return JSONResponse({"key": found[0]})

    async def revoke(self, request: Request, admin: KeyAdmin, by: str) -> Response:
        return JSONResponse({"key": await admin.revoke_key(request.path_params["key_id"], by=by)})

    async def rotate(self, request: Request, admin: KeyAdmin, by: str) -> Response:
        old = request.path_params["key_id"]
        key, token = await admin.rotate_key(old, by=by)
        return JSONResponse({"token": token, "key": key, "replaces": old}, status_code=201)

    async def revoke_jti(self, request: Request, admin: KeyAdmin, by: str) -> Response:
        body = await self._body(request)
        jti, note = body.get("jti"), body.get("note", "")
        if not isinstance(jti, str) or not isinstance(note, str):
            raise ValueError("jti and note must be strings")
        added = await admin.revoke_jti(jti, note=note, by=by)
        return JSONResponse({"jti": jti, "added": added})
