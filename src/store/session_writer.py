"""Agent sessions' turns kept by a process of their own, off the daemon's interpreter.

Keeping a turn is Python work (the new messages' digests, their rows) and a write
transaction: about a third of a millisecond a turn, on the daemon's interpreter
and in its GIL, where it competed with every request in flight. An agent answered
at once sends its next request within milliseconds, so on a busy daemon that work
landed in the middle of other requests (issue 36's benchmark: +0.2 to +0.6 ms on
exai's 3 ms). Like the audit trail's and the spans' writers, the session writer
is a process: the daemon's side (:class:`SessionWriter`) marshals a batch of
turns and writes it to a pipe; the writer opens the same store
(:func:`~exai.store.backends.open_store` with the daemon's settings, sent over
the pipe, never in argv or its environment) and keeps them with
:meth:`~exai.store.sessions.SessionRows.keep_session_turns`, each batch in one
transaction as before, and answers where each turn went.

:class:`SessionWriter` has the store's ``keep_session_turns``, so
:class:`~exai.tools.session_keeper.SessionKeeper` drives it as it drives a store:
one batch at a time, in order, tried again with backoff when it fails. A writer
that exits (or cannot start) fails the batch in flight like an unreachable store;
the next batch starts a new one. A batch the writer kept but could not answer for
is kept again by the retry, which the store sees as what it is, a retry of the
same requests (nothing is stored twice).

The writer starts on the first turn to keep, so a daemon no agent uses runs none.
SQLite: the writer's transactions and the daemon's take the file's one write lock
in turn (WAL; a few hundred microseconds a batch). Postgres: the writer has a
connection of its own.

Frames are those of :mod:`exai.worker_frames` (marshal). To the writer:
``("config", settings)`` (pickled, once), ``("keep", seq, turns)``; from it:
``("kept", seq, results)`` or ``("failed", seq, error)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import marshal
import os
import pickle
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO, Final

from exai.errors import ExaiError
from exai.logs import get_logger
from exai.store.session_turns import SessionKept, SessionTurn
from exai.subprocesses import worker_environment
from exai.worker_frames import FRAME_HEADER, FrameError, frame_length, parse_frame, widen_pipe

__all__ = ["SessionWriter", "TurnNotKept"]

log = get_logger("exai.sessions")

# -P: the working directory is not put on the writer's import path.
WRITER_COMMAND: Final = (sys.executable, "-P", "-m", "exai.store.session_writer")
_STOP_S: Final = 10.0
_MARSHAL_VERSION: Final = 4


class TurnNotKept(ExaiError):
    """The store refused a turn as such (a malformed message, a request key reused):
    the error the writer met, by its class and message."""


def _turn_fields(turn: SessionTurn) -> tuple[Any, ...]:
    allowed = turn.allowed_models
    return (turn.owner, list(turn.messages), dict(turn.answer), turn.request_id,
            turn.session_id, turn.face, turn.client, turn.ref, turn.model, turn.provider,
            None if turn.usage is None else dict(turn.usage),
            None if allowed is None else tuple(sorted(allowed)))  # fmt: skip


def _turn(fields: Sequence[Any]) -> SessionTurn:
    *head, allowed = fields
    return SessionTurn(*head, allowed_models=None if allowed is None else frozenset(allowed))


def _frame(message: tuple[Any, ...]) -> bytes:
    payload = marshal.dumps(message, _MARSHAL_VERSION)
    return FRAME_HEADER.pack(len(payload)) + payload


class SessionWriter:
    """The daemon's end: ``keep_session_turns`` over the pipe to the writer process."""

    def __init__(self, settings: Any, *, environment: dict[str, str] | None = None) -> None:
        self._config = pickle.dumps(("config", settings))
        # Never this process's own: the writer gets its settings over the pipe and no
        # secret in its environment (exai.subprocesses).
        self._environment = environment if environment is not None else worker_environment()
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[list[SessionKept | ExaiError]]] = {}
        self._seq = itertools.count(1)
        self._starting = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        process = self._process
        return None if process is None or process.returncode is not None else process.pid

    async def keep_session_turns(
        self, turns: Sequence[SessionTurn]
    ) -> list[SessionKept | ExaiError]:
        """What the store's method of the name answers, from the writer. Raises
        :class:`ConnectionError` when the writer exited or could not start, and
        :class:`RuntimeError` with the writer's error when its store failed."""
        if not turns:
            return []
        seq = next(self._seq)
        try:
            frame = _frame(("keep", seq, [_turn_fields(t) for t in turns]))
        except ValueError:  # a value marshal cannot carry: that turn alone is refused
            if len(turns) == 1:
                return [TurnNotKept("the turn holds a value that cannot be stored")]
            return [kept for turn in turns for kept in await self.keep_session_turns([turn])]
        process = await self._started()
        future = asyncio.get_running_loop().create_future()
        self._pending[seq] = future
        try:
            assert process.stdin is not None
            process.stdin.write(frame)
            await process.stdin.drain()
        except (ConnectionError, OSError) as exc:
            self._pending.pop(seq, None)
            raise ConnectionError(f"the session writer is gone: {exc!r}") from exc
        try:
            return await future
        finally:
            self._pending.pop(seq, None)

    async def _started(self) -> asyncio.subprocess.Process:
        async with self._starting:
            process = self._process
            if process is not None and process.returncode is None:
                return process
            try:
                process = await asyncio.create_subprocess_exec(
                    *WRITER_COMMAND, stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE, env=self._environment, close_fds=True,
                )  # fmt: skip
            except OSError as exc:
                raise ConnectionError(f"the session writer did not start: {exc!r}") from exc
            assert process.stdin is not None and process.stdout is not None
            # A batch of an agent's turns carries their whole histories: hundreds of KiB.
            pipe = process.stdin.get_extra_info("pipe")
            if pipe is not None:
                widen_pipe(pipe.fileno())
            process.stdin.write(FRAME_HEADER.pack(len(self._config)) + self._config)
            self._process = process
            self._reader = asyncio.get_running_loop().create_task(
                self._read(process), name="exai-session-writer-reports"
            )
            log.info("session_writer_started", pid=process.pid)
            return process

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        why = "exited"
        try:
            while True:
                header = await process.stdout.readexactly(FRAME_HEADER.size)
                message = parse_frame(await process.stdout.readexactly(frame_length(header)))
                future = self._pending.get(message[1]) if len(message) > 1 else None
                if future is None or future.done():
                    continue
                if message[0] == "kept":
                    future.set_result([_result(r) for r in message[2]])
                elif message[0] == "failed":
                    future.set_exception(RuntimeError(f"the session writer's store: {message[2]}"))
        except asyncio.IncompleteReadError:
            pass
        except (FrameError, OSError, ValueError) as exc:
            why = f"sent a bad frame ({exc})"
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        code = await process.wait()
        if self._pending:
            log.error("session_writer_exited", why=why, returncode=code, batches=len(self._pending))
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError(f"the session writer {why} ({code})"))

    async def aclose(self) -> None:
        """Let the writer finish its batch and stop (its stdin ends), within ``_STOP_S``."""
        process, reader = self._process, self._reader
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), _STOP_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await reader


def _result(fields: Sequence[Any]) -> SessionKept | ExaiError:
    if fields[0] == "error":
        return TurnNotKept(f"{fields[1]}: {fields[2]}")
    thread_id, kept, first, last, follows, asked = fields
    return SessionKept(thread_id, kept, first, last, follows, tuple(asked))


def _encoded(result: SessionKept | ExaiError) -> tuple[Any, ...]:
    if isinstance(result, ExaiError):
        return ("error", type(result).__name__, result.message)
    return (result.thread_id, result.kept, result.first_seq, result.last_seq, result.follows,
            tuple(result.asked))  # fmt: skip


# --- the writer process ---------------------------------------------------------------------


def _read_frame(stream: BinaryIO) -> bytes | None:
    """The next frame's payload (``stream`` is buffered: a read returns all it asks
    for unless the pipe ends); None when the pipe ended between frames."""
    header = stream.read(FRAME_HEADER.size)
    if not header:
        return None
    length = frame_length(header) if len(header) == FRAME_HEADER.size else -1
    payload = stream.read(length) if length >= 0 else b""
    if len(payload) != length:
        raise FrameError("the pipe ended inside a frame")
    return payload


def _give_up_cpu(settings: Any) -> None:
    """Lower this process's CPU priority before it starts a thread: Linux applies a
    nice value to the calling thread, and the threads it starts inherit it.

    Not ``SCHED_IDLE``, which would leave the cores to requests entirely: with every
    core busy it kept 8 turns in 20 s, and a writer preempted inside its transaction
    held SQLite's write lock from the daemon for up to 1.3 s (nice 10: all 360
    turns kept, the daemon's writes waiting at most 58 ms).
    """
    if settings.sessions_writer_nice and hasattr(os, "nice"):  # POSIX only
        os.nice(settings.sessions_writer_nice)


async def _serve(settings: Any, stdin: BinaryIO, out: BinaryIO) -> None:
    from exai.audit.scrub import log_scrubber
    from exai.logs import configure_logging
    from exai.store.backends import open_store

    configure_logging(settings.log_format, settings.log_level, stream=sys.stderr,
                      scrubber=log_scrubber(settings))  # fmt: skip
    store = await open_store(settings)
    try:
        while (payload := await asyncio.to_thread(_read_frame, stdin)) is not None:
            _, seq, fields = parse_frame(payload)
            try:
                results = await store.keep_session_turns([_turn(f) for f in fields])
            except Exception as exc:  # the store is unreachable: the daemon tries again
                out.write(_frame(("failed", seq, repr(exc))))
            else:
                out.write(_frame(("kept", seq, [_encoded(r) for r in results])))
            out.flush()
    finally:
        await store.aclose()


def main() -> None:
    # Frames go to the daemon on the original stdout; anything else that writes to
    # stdout (a library's print) goes to stderr, where it cannot break a frame.
    out = open(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = open(0, "rb", closefd=False)
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        config = _read_frame(stdin)
        if config is None:
            return
        name, settings = pickle.loads(config)
        if name != "config":
            raise FrameError("the first frame must be the writer's settings")
        _give_up_cpu(settings)
        asyncio.run(_serve(settings, stdin, out))


if __name__ == "__main__":
    main()
