"""``exai serve`` (the daemon) and ``exai stop`` (stop the one on this machine's port).

Start-up either succeeds or ends the process: every failure (an invalid setting,
a port in use, an unreadable file a setting names, a database that does not
answer) prints one line naming the cause and the setting or port, and exits
non-zero with nothing left running, so a supervisor sees it and an IDE's
autostart reports it. The settings are checked first the way ``exai config``
checks them (:mod:`exai.cli.preflight`).

While it runs, the daemon keeps a pid file, ``daemon-<port>.pid`` in the data
directory, which ``exai stop`` reads to send it SIGTERM: the way to stop a
daemon the shim started in the background, or one ``exai serve --detach``
started (in the background, as the shim's autostart does, logging to
``daemon.log`` in the data directory; it returns once the daemon listens).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import signal
import sys
import time
from pathlib import Path

from exai.cli.common import EXIT_FAILED, EXIT_USAGE, fail, load_or_exit, say, warn_misspelt
from exai.cli.numbers import number
from exai.redact import mask_url_credentials
from exai.settings import Settings, SettingsError

__all__ = ["pid_file", "register"]

_INTERRUPTED = 130


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the daemon")
    p.add_argument("--host", help="override EXAI_WS_HOST")
    p.add_argument("--port", type=number(0, 65535, integer=True), help="override EXAI_WS_PORT")
    p.add_argument("--detach", action="store_true",
                   help="start the daemon in the background and return once it listens "
                   "(its log: daemon.log in the data directory; `exai stop` stops it)")  # fmt: skip
    p.set_defaults(func=_serve)

    s = sub.add_parser("stop", help="stop the daemon listening on EXAI_WS_PORT on this machine",
                       description="Send SIGTERM to the daemon that `exai serve` (or an IDE's "
                       "autostarted shim) runs on this machine's EXAI_WS_PORT, and wait for it "
                       "to finish its running calls and exit.")  # fmt: skip
    s.add_argument("--port", type=number(1, 65535, integer=True), help="override EXAI_WS_PORT")
    s.add_argument("--wait", type=number(0, 86400),
                   help="seconds to wait (default: the grace period + 10)")  # fmt: skip
    s.set_defaults(func=_stop)


def pid_file(settings: Settings, port: int | None = None) -> Path:
    """Where the daemon on ``port`` (default: EXAI_WS_PORT) keeps its pid."""
    return settings.data_dir / f"daemon-{settings.ws_port if port is None else port}.pid"


def _serve(args: argparse.Namespace) -> int:
    warn_misspelt()
    settings = load_or_exit(ws_host=args.host, ws_port=args.port)
    from exai.audit.scrub import log_scrubber, text_scrubber
    from exai.cli.preflight import check_settings
    from exai.logs import configure_logging
    from exai.tracing import setup as tracing_setup

    try:
        undecided = check_settings(settings)
    except SettingsError as exc:
        fail(*exc.problems)
    if args.detach:
        configure_logging(settings.log_format, "warning", stream=sys.stderr,
                          scrubber=log_scrubber(settings))  # fmt: skip
        return _detach(settings)
    configure_logging(settings.log_format, settings.log_level,
                      scrubber=log_scrubber(settings))  # fmt: skip
    from exai.subprocesses import worker_environment

    try:
        tracing_setup.configure(settings, scrub=text_scrubber(settings),
                                environment=worker_environment())  # fmt: skip
    except ValueError as exc:  # an OpenTelemetry variable it would not apply
        fail(f"tracing: {exc}")
    try:
        return asyncio.run(_run(settings, undecided))
    except KeyboardInterrupt:  # Ctrl-C during start-up: what started was stopped
        return _INTERRUPTED
    finally:
        tracing_setup.shutdown()  # what is queued goes out, bounded by the exporter's timeout


async def _run(settings: Settings, undecided: list[tuple[str, str]]) -> int:
    from exai.app import App, StartupError
    from exai.cli.preflight import unknown_models

    app = App(settings)
    try:
        await app.start()
    except (StartupError, SettingsError) as exc:
        say(f"cannot start: {_one_line(exc)}")
        return EXIT_USAGE if isinstance(exc, SettingsError) else EXIT_FAILED
    except Exception as exc:
        say(f"cannot start: {_one_line(exc, typed=True)}")
        return EXIT_FAILED
    problems = unknown_models(app.services.providers.catalogue, undecided)
    if problems:
        await app.stop(grace_s=0.0)
        say(*(f"cannot start: {line}" for line in problems))
        return EXIT_USAGE
    _settle_heap()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    path = pid_file(settings, app.port)
    _write_pid(path, settings.ws_host, app.port)
    try:
        await stop.wait()
        await app.stop()
    finally:
        with contextlib.suppress(OSError):
            if _read_pid(path) == os.getpid():
                path.unlink()
    return 0


def _detach(settings: Settings) -> int:
    """Start ``exai serve`` in a session of its own, as the shim's autostart does."""
    from exai.shim.autostart import LOG_NAME, AutostartError, ensure_daemon

    host, port = settings.ws_host, settings.ws_port
    log = settings.data_dir / LOG_NAME
    try:
        pid = asyncio.run(ensure_daemon(settings.data_dir, host, port,
                                        started_by="exai serve --detach"))  # fmt: skip
    except AutostartError as exc:
        said = [line.removeprefix("exai: ") for line in _tail(log) if line.startswith("exai: ")]
        say(*(said[-1:] or [str(exc)]), f"(the daemon's log: {log})")
        return EXIT_FAILED
    url = f"ws://{host}:{port}"
    if pid is None:
        say(f"a daemon already listens on {url}; `exai stop` stops it")
        return 0
    print(f"exai: the daemon runs in the background (pid {pid}) on {url}; its log is {log}; "
          "`exai stop` stops it", file=sys.stderr)  # fmt: skip
    return 0


def _tail(path: Path, lines: int = 50) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def _one_line(exc: BaseException, *, typed: bool = False) -> str:
    """The error, after the notes saying what was being started, as one line."""
    notes = "; ".join(str(note) for note in getattr(exc, "__notes__", ()))
    detail = f"{type(exc).__name__}: {exc}" if typed else str(exc)
    return mask_url_credentials(" ".join(f"{notes + ': ' if notes else ''}{detail}".split()))


def _settle_heap() -> None:
    """Keep the start-up heap out of the garbage collector's sight.

    What exists once the daemon has started (modules, pydantic schemas, the tool
    registry, SDK clients, some 150,000 objects) lives as long as the process, yet
    every full collection walked all of it: a fifth of the daemon's CPU time per
    call on the echo path. Freezing moves it to a generation that is never
    collected. The thresholds stay Python's own: raising them made the daemon
    keep more garbage after a storm of disconnects than the reliability suite
    allows.
    """
    gc.collect()
    gc.freeze()


# --- the pid file and exai stop -------------------------------------------------


def _write_pid(path: Path, host: str, port: int) -> None:
    try:
        path.write_text(json.dumps({"pid": os.getpid(), "host": host, "port": port}) + "\n")
    except OSError as exc:  # the daemon runs all the same; only `exai stop` will not find it
        say(f"cannot write {path} ({exc.strerror}); `exai stop` will not find this daemon")


def _read_pid(path: Path) -> int | None:
    try:
        pid = json.loads(path.read_text()).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_exai(pid: int) -> bool:
    """Whether ``pid`` runs exai (where /proc says; elsewhere the pid file is trusted)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return True
    return b"exai" in cmdline and b"serve" in cmdline


def _stop(args: argparse.Namespace) -> int:
    settings = load_or_exit(ws_port=args.port)
    path = pid_file(settings)
    pid = _read_pid(path)
    if pid is None:
        say(f"no daemon of this machine's is known on port {settings.ws_port} "
            f"(no pid file {path}); one started elsewhere is stopped where it runs")  # fmt: skip
        return EXIT_FAILED
    if not _alive(pid) or not _is_exai(pid):
        with contextlib.suppress(OSError):
            path.unlink()
        say(f"the daemon on port {settings.ws_port} (pid {pid}) is not running; "
            f"removed the stale {path}")  # fmt: skip
        return EXIT_FAILED
    try:
        os.kill(pid, signal.SIGTERM)
    except PermissionError:
        say(f"not allowed to stop pid {pid} (it runs as another user)")
        return EXIT_FAILED
    wait = args.wait if args.wait is not None else settings.shutdown_grace_s + 10.0
    deadline = time.monotonic() + wait
    while _alive(pid) and _is_exai(pid):  # a reaped-late zombie has no command line
        if time.monotonic() > deadline:
            say(f"pid {pid} is still finishing after {wait:g} s; it exits once its running "
                "calls end (EXAI_SHUTDOWN_GRACE_S)")  # fmt: skip
            return EXIT_FAILED
        time.sleep(0.1)
    say(f"stopped the daemon on port {settings.ws_port} (pid {pid})")
    return 0
