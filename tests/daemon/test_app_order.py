"""The order the composition root starts the faces in, as a client waiting on the daemon sees it."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from exai.app import App
from tests.conftest import make_settings


async def test_the_http_faces_listen_before_the_websocket_port_answers(tmp_path):
    # exai serve --detach, the shim's autostart and HAProxy wait for the WebSocket
    # port's /health; a client that goes on to the HTTP faces must find them up.
    app = App(make_settings(tmp_path))
    seen: list[bool] = []
    start_ws = app.ws.start

    async def ws_start() -> None:
        assert app.web is not None, "the HTTP faces were not started first"
        url = urlsplit(app.web.own_url)
        try:
            _, writer = await asyncio.open_connection(url.hostname, url.port)
        except OSError:
            seen.append(False)
        else:
            seen.append(True)
            writer.close()
        await start_ws()

    app.ws.start = ws_start  # type: ignore[method-assign]
    async with app:
        assert seen == [True]
