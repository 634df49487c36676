"""``exai shim`` from start to exit: connect, serve MCP on stdio, stop cleanly.

The shim serves MCP immediately and connects to the daemon in the background;
an IDE's ``initialize`` waits at most a couple of seconds for that connection's
first answer, so that a refused token fails the handshake (see
:mod:`exai.shim.server`), and calls wait for the connection up to
``EXAI_SHIM_CONNECT_WAIT_S``. It binds no port and exits when
stdin closes (the IDE closed the server) or its parent process dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from dataclasses import dataclass
from urllib.parse import urlsplit

from exai.client import ExaiClient
from exai.logs import get_logger
from exai.settings import Settings
from exai.shim.autostart import AutostartError, ensure_daemon
from exai.shim.server import Shim
from exai.shim.stdio import stdio_streams
from exai.shim.watchdog import wait_for_parent_exit

__all__ = ["ShimOptions", "run_shim", "serve"]

log = get_logger("exai.shim")


@dataclass(frozen=True)
class ShimOptions:
    url: str
    token: str | None
    autostart: bool
    autostart_timeout_s: float = 20.0
    connect_wait_s: float = 10.0
    tools_poll_s: float = 30.0
    parent_poll_s: float = 1.0

    @classmethod
    def from_settings(
        cls, settings: Settings, url: str | None = None, token: str | None = None,
        autostart: bool | None = None,
    ) -> ShimOptions:  # fmt: skip
        default_token = settings.ws_token.get_secret_value() if settings.ws_token else None
        return cls(
            url=url or f"ws://{settings.ws_host}:{settings.ws_port}",
            token=token or default_token or None,
            autostart=settings.shim_autostart if autostart is None else autostart,
            autostart_timeout_s=settings.shim_autostart_timeout_s,
            connect_wait_s=settings.shim_connect_wait_s,
            tools_poll_s=settings.shim_tools_poll_s,
        )


def run_shim(settings: Settings, options: ShimOptions) -> int:
    return asyncio.run(serve(settings, options))


async def serve(settings: Settings, options: ShimOptions) -> int:
    if options.autostart:
        await _autostart(settings, options)
    client = ExaiClient(
        options.url,
        options.token,
        client_name="exai-shim",
        reconnect=True,
        max_reconnect_attempts=None,
        backoff_max_s=5.0,
    )
    shim = Shim(client, connect_wait_s=options.connect_wait_s, tools_poll_s=options.tools_poll_s)
    server = shim.build_server()
    client.connect_in_background()
    log.info("shim starting", url=options.url)
    try:
        async with stdio_streams() as (read_stream, write_stream):
            serving = asyncio.create_task(
                server.run(read_stream, write_stream, shim.initialization_options(server))
            )
            orphaned = asyncio.create_task(wait_for_parent_exit(options.parent_poll_s))
            signalled = asyncio.create_task(_signalled())
            polling = asyncio.create_task(shim.watch_tools())
            done, _ = await asyncio.wait({serving, orphaned, signalled},
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if orphaned in done:
                log.info("parent process exited; shim stopping")
            tasks = (serving, orphaned, signalled, polling)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            # Calls cut short above send their `cancel` to the daemon from here.
            await shim.drain()
    finally:
        await client.close()
    log.info("shim stopped")
    return 0


async def _signalled() -> None:
    """Return on SIGTERM or SIGINT, so calls in flight are cancelled on the daemon too."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def _autostart(settings: Settings, options: ShimOptions) -> None:
    parts = urlsplit(options.url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    env = {"EXAI_WS_TOKEN": options.token} if options.token else None
    try:
        pid = await ensure_daemon(settings.data_dir, host, port,
                                  timeout_s=options.autostart_timeout_s, env=env)  # fmt: skip
    except AutostartError as exc:
        log.error("could not start the daemon", error=str(exc))
        return
    if pid is not None:
        log.info("started the daemon", pid=pid)
