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
``GET /admin/revoked-jtis``                ``{"jtis": [{"jti", "revoked_at", "note"}]}``
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

from exai.keys import KeyAdmin, KeyNotFoundError
from exai.port import Port
from exai.web.admin_api import json_body, operator_only

__all__ = ["routes"]

PREFIX = "/admin/keys"


def routes(core: Port) -> list[BaseRoute]:
    api = _KeysApi(core)
    return [
        Route(PREFIX, api.handle(api.list_or_create), methods=["GET", "POST"]),
        Route(PREFIX + "/{key_id}", api.handle(api.one), methods=["GET", "PATCH", "DELETE"]),
        Route(PREFIX + "/{key_id}/revoke", api.handle(api.revoke), methods=["POST"]),
        Route(PREFIX + "/{key_id}/rotate", api.handle(api.rotate), methods=["POST"]),
        Route("/admin/revoked-jtis", api.handle(api.revoke_jti), methods=["GET", "POST"]),
    ]


class _KeysApi:
    def __init__(self, core: Port) -> None:
        self.core = core

    def handle(self, action: Any) -> Any:
        return operator_only(self.core, "keys", lambda core: core.key_admin, action,
                             not_found=KeyNotFoundError)  # fmt: skip

    async def list_or_create(self, request: Request, admin: KeyAdmin, by: str) -> Response:
        if request.method == "GET":
            return JSONResponse({"keys": await admin.list_keys()})
        key, token = await admin.create_key(await json_body(request), by=by)
        return JSONResponse({"token": token, "key": key}, status_code=201)

    async def one(self, request: Request, admin: KeyAdmin, by: str) -> Response:
        key_id = request.path_params["key_id"]
        if request.method == "DELETE":
            return JSONResponse({"key": await admin.revoke_key(key_id, by=by)})
        if request.method == "PATCH":
            changes = await json_body(request)
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
        if request.method == "GET":
            return JSONResponse({"jtis": await admin.list_jtis()})
        body = await json_body(request)
        jti, note = body.get("jti"), body.get("note", "")
        if not isinstance(jti, str) or not isinstance(note, str):
            raise ValueError("jti and note must be strings")
        added = await admin.revoke_jti(jti, note=note, by=by)
        return JSONResponse({"jti": jti, "added": added})
