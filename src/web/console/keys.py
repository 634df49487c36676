"""The operator's Keys page: every key, a form to make one, change, revoke and rotate.

Operators only (:meth:`exai.port.Reads.is_admin`): anyone else gets 403 whether
they navigate, type the URL or post a forged form, and every form carries the
session's CSRF token (:meth:`~exai.web.console.app.Console.form`). A new key's
token is shown once, in the answer to the form that made it (a page, not a
redirect: a flash would keep it in the store); the list never shows a secret.
The work is the port's :class:`~exai.keys.KeyAdmin`, as ``exai keys`` and
``/admin/keys`` do it.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from exai.errors import ExaiError
from exai.web.console.app import PREFIX, Console

__all__ = ["routes"]

_GRANT = ("principal", "scopes", "budget", "rate", "models", "expires", "name", "note")
_CHANGEABLE = _GRANT[1:]


def routes(console: Console) -> list[BaseRoute]:
    page = _KeysPage(console)
    return [
        Route(f"{PREFIX}/admin/keys", page.list_or_create, methods=["GET", "POST"]),
        Route(f"{PREFIX}/admin/keys/jti", page.revoke_jti, methods=["POST"]),
        Route(f"{PREFIX}/admin/keys/{{key_id}}/{{action}}", page.act, methods=["POST"]),
    ]


class _KeysPage:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.core = console.core

    def _refused(self, request: Request) -> Response | None:
        if not self.core.reads.is_admin(self.console.principal(request)):
            return self.console.refused(request, 403, "The keys are the operator's.")
        if self.core.key_admin is None:
            return self.console.refused(request, 503, "This daemon keeps no keys (no SQL store).")
        return None

    async def _show(self, request: Request, *, status: int = 200, **context: Any) -> Response:
        assert self.core.key_admin is not None
        keys = await self.core.key_admin.list_keys()
        jtis = await self.core.key_admin.list_jtis()
        return self.console.page(request, "admin_keys.html", status=status, keys=keys, jtis=jtis,
                                 form=context.pop("form", {}), **context)  # fmt: skip

    async def _posted(self, request: Request) -> dict[str, str] | Response:
        """A form an operator posted with the session's CSRF token, or the refusal."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        fields = await self.console.form(request)
        return self.console.refusal(request) if fields is None else fields

    async def revoke_jti(self, request: Request) -> Response:
        """Refuse a JWT by its ``jti`` claim from now on, on every daemon on the store."""
        fields = await self._posted(request)
        if isinstance(fields, Response):
            return fields
        assert self.core.key_admin is not None
        jti = fields.get("jti", "").strip()
        try:
            added = await self.core.key_admin.revoke_jti(
                jti, note=fields.get("note", "").strip(), by=self.console.principal(request).name
            )
        except ValueError as exc:
            return await self._show(request, status=400, problem=f"Not revoked: {exc}")
        said = "is refused on every daemon" if added else "was already revoked"
        self.console.session(request).flash("ok", f"The JWT with jti {jti} {said}.")
        return self.console.redirect(f"{PREFIX}/admin/keys")

    async def list_or_create(self, request: Request) -> Response:
        if request.method == "GET":
            refused = self._refused(request)
            return refused if refused is not None else await self._show(request)
        fields = await self._posted(request)
        if isinstance(fields, Response):
            return fields
        assert self.core.key_admin is not None
        grant = {name: fields.get(name, "").strip() or None for name in _GRANT}
        by = self.console.principal(request).name
        try:
            key, token = await self.core.key_admin.create_key(grant, by=by)
        except (ValueError, ExaiError) as exc:
            return await self._show(request, status=400, form=fields,
                                    problem=f"The key was not made: {exc}")  # fmt: skip
        return await self._show(request, new_token=token, new_key=key)

    async def act(self, request: Request) -> Response:
        fields = await self._posted(request)
        if isinstance(fields, Response):
            return fields
        admin = self.core.key_admin
        assert admin is not None
        key_id, action = request.path_params["key_id"], request.path_params["action"]
        by = self.console.principal(request).name
        try:
            if action == "revoke":
                key = await admin.revoke_key(key_id, by=by)
                self.console.session(request).flash(
                    "ok", f"Key {key['id']} ({key['principal']}) is revoked on every daemon."
                )
                return self.console.redirect(f"{PREFIX}/admin/keys")
            if action == "update":
                changes = {name: fields[name].strip() or None for name in _CHANGEABLE
                           if name in fields}  # fmt: skip
                key = await admin.update_key(key_id, changes, by=by)
                self.console.session(request).flash(
                    "ok", f"Key {key['id']} ({key['principal']}) changed on every daemon."
                )
                return self.console.redirect(f"{PREFIX}/admin/keys")
            if action == "rotate":
                key, token = await admin.rotate_key(key_id, by=by)
                return await self._show(request, new_token=token, new_key=key, replaces=key_id)
        except (ValueError, ExaiError) as exc:
            return await self._show(request, status=400, problem=str(exc))
        return self.console.refused(request, 404, f"Keys have no action {action!r}.")
