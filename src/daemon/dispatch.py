"""From a ``call_tool`` frame to exactly one ``call_tool_res``.

``Dispatcher.call`` checks the request (replay, tool, scope, arguments, rate),
acknowledges it with the deadline it will enforce, and runs the tool in a task
of its own so calls on one connection run concurrently and finish in any order.
The task waits for capacity (per session, then global), runs the tool under the
deadline, and always ends by delivering one result: the tool's answer, or the
error that stopped it (``TIMEOUT``, ``CANCELLED``, ``OVER_CAPACITY``, ...).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pydantic

from exai.accounting.ledger import charge_fields
from exai.audit import args_digest
from exai.daemon.replay import KEEP_REQUEST_MAX_CHARS, call_fingerprint
from exai.errors import (
    CancelledError,
    ExaiError,
    ForbiddenError,
    InternalError,
    OverCapacityError,
    RequestIdReusedError,
    TimeoutError_,
    ToolNotFoundError,
    ValidationError_,
)
from exai.limits import CapacityLimiter, TokenBucket
from exai.logs import bind_call, get_logger
from exai.protocol import (
    CallToolAck,
    CallToolFrame,
    CallToolResult,
    ErrorInfo,
    ProgressFrame,
    ResultMetadata,
    StreamChunk,
    describe_validation_error,
    dump_frame_bytes,
    encode_result,
    parse_server_frame,
)
from exai.tools.artifacts import may_spill, spill_if_large
from exai.tools.base import NullAudit, Services, ToolContext, ToolResult
from exai.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from exai.daemon.metrics import DaemonMetrics
    from exai.daemon.session import Session

from exai.daemon.session import Call

__all__ = ["Dispatcher"]

log = get_logger("exai.daemon")


class Dispatcher:
    def __init__(
        self,
        services: Services,
        registry: ToolRegistry,
        metrics: DaemonMetrics,
        global_limiter: CapacityLimiter,
    ) -> None:
        self.services = services
        self.settings = services.settings
        self.registry = registry
        self.metrics = metrics
        self.global_limiter = global_limiter
        self._buckets: dict[str, TokenBucket] = {}
        self.shared_rates: Any = None  # exai.cluster.ClusterState
        self.running: set[Call] = set()
        self.draining = False
        self._background: set[asyncio.Future[None]] = set()
        self._beating: set[Call] = set()  # calls whose heartbeat is still being sent

    # --- admission --------------------------------------------------------

    def submit(self, session: Session, frame: CallToolFrame, raw: str | None = None) -> None:
        """Admit a call and start its task, or answer it at once; never waits.

        Called for each ``call_tool`` as it arrives (see :mod:`exai.daemon.transport`).
        A ``request_id`` this session already used is a retry only if it asks for
        the same tool with the same arguments, and the principal may still call
        that tool: then it is attached to the running call or answered from the
        replay cache. Anything else under a used id is refused. ``raw`` is the
        frame's text, when there is one: kept instead of a fingerprint if it is small.
        """
        rid = frame.request_id
        try:
            running = session.calls.get(rid)
            if running is not None:  # a retry of a call still running: attach to it
                self._check_retry(session, frame, running.fingerprint())
                session.post(CallToolAck(request_id=rid, timeout_s=running.timeout_s))
                return
            finished = session.replay(rid)
            if finished is not None:
                self._check_retry(session, frame, finished.fingerprint)
                session.post(_replayed(finished.result))
                return
            tool, arguments = self._admit(session, frame)
        except ExaiError as exc:
            self._refuse(session, frame, exc)
            return

        s = self.settings
        timeout_s = min(frame.timeout_s or s.default_timeout_s, s.max_timeout_s)
        now = time.monotonic()
        call = Call(rid, tool.name, timeout_s, deadline=now + timeout_s, started=now,
                    asked=frame.name, arguments=frame.arguments,
                    request=raw if raw is not None and len(raw) <= KEEP_REQUEST_MAX_CHARS
                    else None, last_progress=now)  # fmt: skip
        session.calls[rid] = call
        self.running.add(call)
        call.task = asyncio.get_running_loop().create_task(
            self._run(session, call, tool, arguments, frame), name=f"call:{session.id}:{rid}"
        )

    def _check_retry(self, session: Session, frame: CallToolFrame, earlier: str) -> None:
        """Refuse a call under a used request_id unless it is that call, still allowed."""
        self._authorize(session, frame.name)
        if call_fingerprint(frame.name, frame.arguments) != earlier:
            raise RequestIdReusedError(frame.request_id)

    def _refuse(self, session: Session, frame: CallToolFrame, exc: ExaiError) -> None:
        """Answer a call that will not run with its error, counted and audited."""
        self.metrics.call_finished(self._label(frame.name), exc.code.value, None)
        self.services.audit.emit("call_finished", session_id=session.id,
                                 request_id=frame.request_id, tool=frame.name,
                                 principal=session.principal.name, duration_ms=0.0,
                                 status="error", error_code=exc.code.value)  # fmt: skip
        session.post(_error_result(frame.request_id, frame.name, exc, 0.0))

    def _suspending(self, session: Session, call: Call) -> None:
        """The call is about to wait for the first time: arm its deadline and ack it.

        A call that completes in its first step (version, echo, most rejections)
        needs neither: it is answered by its call_tool_res alone, and never had a
        timer to arm and cancel. Those are most calls on the hottest path. Every
        place ``_run`` can first wait calls this just before (idempotent).
        """
        if call.timer is not None or call.finished:
            return
        call.timer = asyncio.get_running_loop().call_at(
            _loop_deadline(call.deadline), self._expire, call
        )
        if not call.acked:
            task = asyncio.ensure_future(self._ack(session, call))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _ack(self, session: Session, call: Call) -> None:
        # Checked again here: the call may have finished before this task ran, and
        # an ack must never follow its result.
        if call.finished or call.acked:
            return
        call.acked = True
        await session.deliver(CallToolAck(request_id=call.request_id, timeout_s=call.timeout_s))

    def _authorize(self, session: Session, name: str) -> Any:
        """The tool ``name``, if it exists and the session's principal may call it now.

        Asked of every call, retries included: a session resumed with a narrower
        token must not be handed what its earlier token was allowed to see.
        """
        tool = self.registry.get(name)
        if tool is None:
            listed = ", ".join(self.registry.names())
            raise ToolNotFoundError(f"unknown tool {name[:128]!r}; the tools are: {listed}")
        if not session.principal.may_call(tool.name):
            raise ForbiddenError(f"principal {session.principal.name!r} may not call {tool.name!r}")
        return tool

    def _admit(self, session: Session, frame: CallToolFrame) -> tuple[Any, Any]:
        if self.draining:
            raise OverCapacityError("the daemon is shutting down", retry_after_s=1.0)
        tool = self._authorize(session, frame.name)
        try:
            arguments = tool.Input.model_validate(frame.arguments)
        except pydantic.ValidationError as exc:
            listed, details = describe_validation_error(exc, whole="(arguments)", listed=8)
            raise ValidationError_(
                f"invalid arguments for {tool.name}: {listed}", details=details
            ) from None
        if self.settings.rate_limit_per_min > 0:
            self._rate_limit(session.principal.name)
        return tool, arguments

    def _rate_limit(self, principal: str) -> None:
        s = self.settings
        bucket = self._buckets.get(principal)
        if bucket is None:
            bucket = self._buckets[principal] = TokenBucket(
                s.rate_limit_per_min / 60.0, s.rate_limit_burst
            )
        shared = self.shared_rates  # counts across daemons, with a Postgres store
        if shared is not None:
            shared.check_rate(principal)
        bucket.take()
        if shared is not None:
            shared.spend_rate(principal)

    # --- execution --------------------------------------------------------

    async def _run(
        self, session: Session, call: Call, tool: Any, arguments: Any, frame: CallToolFrame
    ) -> None:
        call.started_running = True
        rid = call.request_id
        # The task runs in its own copy of the context, so this reaches every log
        # line written while it runs (providers and store included), and no other call.
        bind_call(session.id, rid, tool.name)
        clog = log  # session_id, request_id and tool arrive through the context variable
        audit = self.services.audit
        if not isinstance(audit, NullAudit):
            audit.emit("call_started", session_id=session.id, request_id=rid, tool=tool.name,
                       principal=session.principal.name, **_digest(frame.arguments))  # fmt: skip
        result: ToolResult | None = None
        error: ExaiError | None = None
        context: ToolContext | None = None
        try:
            if call.cancel_reason is not None:  # cancelled before this task first ran
                raise asyncio.CancelledError
            # Plain acquire/release, and a queue only when a slot is not free at
            # once: this is the hottest path in the daemon.
            session_limiter, global_limiter = session.limiter, self.global_limiter
            if not session_limiter.try_acquire():
                self._suspending(session, call)
                await self._queue_for(session_limiter)
            try:
                if not global_limiter.try_acquire():
                    self._suspending(session, call)
                    await self._queue_for(global_limiter)
                try:
                    call.ran = True
                    context = self._context(session, call, tool.name, frame, clog)
                    coro = tool.run(arguments, context)
                    try:
                        pending = coro.send(None)  # the tool's first step, here and now
                    except StopIteration as done:
                        result = done.value
                    else:
                        self._suspending(session, call)
                        result = await _Rest(coro, pending)
                    if tool.spill_results and may_spill(context, result):
                        self._suspending(session, call)
                        result = await spill_if_large(context, result)
                finally:
                    global_limiter.release()
            finally:
                session_limiter.release()
        except ExaiError as exc:
            error = exc
        except asyncio.CancelledError:
            error = _cancelled(call.cancel_reason, tool.name, call.timeout_s)
            # Uncancel so the result below can still be delivered from this task.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        except Exception as exc:  # a bug in a tool: report it, keep serving
            clog.exception("tool raised")
            error = InternalError(f"{tool.name} failed: {type(exc).__name__}: {exc}")
        finally:
            if call.timer is not None:
                call.timer.cancel()
        now = time.monotonic()
        latency_ms = (now - call.started) * 1000
        data = None
        if error is None and result is not None:
            try:
                data = _ok_result(rid, tool.name, result, latency_ms)
            except (TypeError, ValueError) as exc:  # not a result the protocol can carry
                clog.exception("tool returned an unsendable result")
                error = InternalError(f"{tool.name} returned an invalid result: {exc}")
        if data is None:
            assert error is not None
            data = dump_frame_bytes(_error_result(rid, tool.name, error, latency_ms))
            clog.info("call failed", code=error.code.value, message=error.message,
                      latency_ms=round(latency_ms, 2))  # fmt: skip
        status = "ok" if error is None else error.code.value
        self.metrics.call_finished(tool.name, status, latency_ms / 1000)
        charges = context.charges if context is not None else []
        ledger = self.services.ledger
        if charges and ledger is not None:  # every model call, whatever the call's outcome
            thread = result.metadata.get("continuation_id") if result is not None else None
            ledger.record(charges, principal=session.principal.name, tool=tool.name,
                          session_id=session.id, request_id=rid,
                          thread_id=thread if isinstance(thread, str) else None)  # fmt: skip
        call.finished = True
        session.calls.pop(rid, None)
        self.running.discard(call)
        session.last_seen = now
        if call.ran:
            session.remember(call, data, now)
        try:
            await session.deliver(data)
        finally:  # recorded once the answer is on its way, so the client does not wait for it
            if not isinstance(audit, NullAudit):
                audit.emit("call_finished", session_id=session.id, request_id=rid, tool=tool.name,
                           principal=session.principal.name, duration_ms=round(latency_ms, 3),
                           status="ok" if error is None else "error",
                           error_code=None if error is None else error.code.value,
                           **charge_fields(charges))  # fmt: skip

    async def _queue_for(self, limiter: CapacityLimiter) -> None:
        """Wait in ``limiter``'s bounded queue, recording how long it took."""
        waited = time.monotonic()
        await limiter.acquire()
        self.metrics.queue_wait.observe(time.monotonic() - waited)

    def _context(
        self, session: Session, call: Call, tool: str, frame: CallToolFrame, clog: Any
    ) -> ToolContext:
        rid = call.request_id
        seq = 0

        async def progress(message: str, progress: float | None, total: float | None) -> None:
            await self._ack(session, call)
            call.last_progress = time.monotonic()
            await session.deliver(
                ProgressFrame(request_id=rid, message=message, progress=progress, total=total)
            )

        async def chunk(text: str) -> None:
            nonlocal seq
            await self._ack(session, call)
            call.last_progress = time.monotonic()
            await session.deliver(StreamChunk(request_id=rid, seq=seq, text=text))
            seq += 1

        return ToolContext(
            request_id=rid,
            session_id=session.id,
            fingerprint_of=call.fingerprint,
            principal=session.principal,
            tool=tool,
            deadline=call.deadline,
            services=self.services,
            log=clog,
            stream_requested=frame.stream,
            progress_cb=progress,
            stream_cb=chunk,
            client_roots=frame.roots or (),
        )

    def _expire(self, call: Call) -> None:
        if call.task is not None and not call.task.done() and call.cancel_reason is None:
            call.cancel_reason = "timeout"
            call.task.cancel()

    def cancel(self, session: Session, request_id: str, reason: str = "cancel") -> bool:
        call = session.calls.get(request_id)
        if call is None or call.task is None or call.task.done():
            return False
        if call.cancel_reason is None:
            call.cancel_reason = reason
        # Cancelling a task before its first step would end it before _run could
        # catch anything, leaving the call unanswered; _run checks cancel_reason
        # as it starts instead.
        if call.started_running:
            call.task.cancel()
        return True

    async def heartbeat(self, sessions: Any, interval: float) -> None:
        """Tell clients a long call is alive, so their own tool timeouts don't fire.

        Each beat is sent by a task of its own: a client that stops reading blocks
        its own beats (one at a time), never everyone else's nor the caller's tick.
        """
        now = time.monotonic()
        for session in sessions:
            for call in list(session.calls.values()):
                if now - call.last_progress >= interval and call not in self._beating:
                    call.last_progress = now
                    self._beating.add(call)
                    task = asyncio.ensure_future(self._beat(session, call, now - call.started))
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)

    async def _beat(self, session: Session, call: Call, elapsed: float) -> None:
        try:
            await self._ack(session, call)
            if not call.finished:  # checked after the ack: no frame may follow the result
                await session.deliver(
                    ProgressFrame(
                        request_id=call.request_id,
                        message=f"{call.tool} running ({elapsed:.0f}s)",
                    )
                )
        finally:
            self._beating.discard(call)

    def _label(self, name: str) -> str:
        # Unknown names must not create unbounded label sets.
        return name if self.registry.get(name) is not None else "unknown"


class _Rest:
    """The rest of a coroutine whose first step has run and yielded ``pending``.

    Awaiting it does what ``await coro`` would have done from that point on:
    every value the task sends and every exception it throws (a cancel) goes to
    the coroutine, and whatever the coroutine yields goes to the task. ``_run``
    takes a tool's first step itself so that it knows, without scheduling a
    callback for every call, whether the tool finished at once.
    """

    __slots__ = ("coro", "pending")

    def __init__(self, coro: Any, pending: Any) -> None:
        self.coro = coro
        self.pending = pending

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, pending = self.coro, self.pending
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                try:
                    pending = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    pending = coro.send(sent)
                except StopIteration as done:
                    return done.value


def _loop_deadline(monotonic_deadline: float) -> float:
    loop = asyncio.get_running_loop()
    return loop.time() + (monotonic_deadline - time.monotonic())


def _cancelled(reason: str | None, tool: str, timeout_s: float) -> ExaiError:
    if reason == "timeout":
        return TimeoutError_(f"{tool} did not finish within {timeout_s:g}s")
    if reason == "shutdown":
        return CancelledError("cancelled: the daemon is shutting down", retryable=True)
    return CancelledError("cancelled by the client")


def _digest(arguments: dict[str, Any]) -> dict[str, Any]:
    # The audit trail records a digest and the size of the arguments, never their text.
    digest, size = args_digest(arguments)
    return {"args_digest": digest, "args_bytes": size}


def _ok_result(rid: str, tool: str, result: ToolResult, latency_ms: float) -> bytes:
    # The daemon's own values win over a tool's.
    return encode_result(
        rid, result.texts, result.metadata, tool=tool, latency_ms=round(latency_ms, 3)
    )


def _replayed(result: bytes) -> CallToolResult:
    """A kept result, marked as a replay."""
    frame: CallToolResult = parse_server_frame(result)
    meta = frame.metadata.model_copy(update={"replayed": True})
    return frame.model_copy(update={"metadata": meta})


def _error_result(rid: str, tool: str, exc: ExaiError, latency_ms: float) -> CallToolResult:
    info: ErrorInfo = exc.info()
    return CallToolResult(
        request_id=rid,
        outputs=[],
        error=info,
        metadata=ResultMetadata(tool=tool, latency_ms=round(latency_ms, 3)),
    )
