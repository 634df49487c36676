"""The run of one admitted call, step by step, ending in exactly one result.

:func:`run_call` is the body of a call's task. Its steps, in order:

1. **acquire** capacity (the session's limiter, then the daemon's), waiting in
   a bounded queue only when a slot is not free at once;
2. **execute** the tool under the call's deadline: its first step is taken
   here and now, so a tool that finishes at once (``version``, ``echo``, most
   rejections) never arms a timer nor sends an ack;
3. the **outcome**: the encoded result, or the error that stopped the call
   (``TIMEOUT``, ``CANCELLED``, a tool's error, an ``INTERNAL_ERROR`` for a bug);
4. **delivery**: the call leaves the session, its result is sent (at once
   when the connection has room) and kept for a retry;
5. **accounting**: metrics, cost rows for every model call, the call's row of
   the request log, and, once the result is on its way, the audit event.

This is the hottest path in the daemon: each step is a plain function call,
and nothing here waits unless the call has to.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Protocol

from exai.accounting.ledger import Charge, charge_fields
from exai.daemon import traced
from exai.daemon.answers import error_result, ok_result
from exai.daemon.call import Call, ModelEvent, StopReason
from exai.daemon.records import args_digest_fields, log_call
from exai.errors import CancelledError, ExaiError, InternalError, TimeoutError_
from exai.logs import bind_call, get_logger
from exai.protocol import CallToolFrame, ProgressFrame, StreamChunk, StreamEvent, dump_frame_bytes
from exai.tools.artifacts import may_spill, spill_if_large
from exai.tools.base import NullAudit, ToolContext, ToolResult
from exai.tracing import state as tracing_state
from exai.tracing.errors import describe_error

if TYPE_CHECKING:
    from exai.daemon.session import Session
    from exai.limits import CapacityLimiter
    from exai.metrics import DaemonMetrics
    from exai.tools.base import Services

__all__ = ["Dispatch", "run_call"]

log = get_logger("exai.daemon")


class Dispatch(Protocol):
    """What a run needs of the dispatcher that admitted its call
    (:class:`exai.daemon.dispatch.Dispatcher`)."""

    services: Services
    metrics: DaemonMetrics
    global_limiter: CapacityLimiter
    running: set[Call]

    def suspending(self, session: Session, call: Call) -> None:
        """The call is about to wait for the first time (arm its deadline, ack it)."""

    async def ack(self, session: Session, call: Call) -> None:
        """Tell the client the call's deadline, once, and never after its result."""


async def run_call(
    d: Dispatch,
    session: Session,
    call: Call,
    tool: Any,
    arguments: Any,
    frame: CallToolFrame,
    events: bool = False,
) -> None:
    """``events``: the caller (an in-process face) takes structured model events
    rather than text chunks."""
    call.begin()
    # The task runs in its own copy of the context, so this reaches every log
    # line written while it runs (providers and store included), and no other call.
    bind_call(session.id, call.request_id, tool.name)
    context: ToolContext | None = None
    result: ToolResult | None = None
    error: ExaiError | None = None
    # Tracing off: one attribute read, nothing else (see exai.daemon.traced).
    span = traced.call_span(session, call, tool.name) if tracing_state.tracer else None
    try:
        if call.stop_reason is not None:  # stopped before this task first ran
            raise asyncio.CancelledError
        context, result = await _acquire_and_execute(d, session, call, tool, arguments, frame,
                                                      events)  # fmt: skip
    except ExaiError as exc:
        error = exc
    except asyncio.CancelledError:
        error = _cancelled(call.stop_reason, tool.name, call.timeout_s)
        # Uncancel so the result below can still be delivered from this task.
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
    except Exception as exc:  # a bug in a tool: report it, keep serving
        log.exception("tool raised")
        error = InternalError(f"{tool.name} failed: {type(exc).__name__}: {exc}")
    finally:
        if call.timer is not None:
            call.timer.cancel()
    now = time.monotonic()
    latency_ms = (now - call.started) * 1000
    trace_id = span.trace_id if span is not None else None
    data, error = _outcome(call, tool.name, result, error, latency_ms, trace_id)
    charges: list[Charge] = []
    try:
        sent = _deliver_now(d, session, call, data, error, now)
        # Counted once the answer is on its way, and before anything can wait:
        # whatever the caller sends next sees this call accounted for.
        charges = _account(d, session, call, tool.name, result, error, context, latency_ms,
                           trace_id)  # fmt: skip
        if not sent:
            await session.deliver(data)
    finally:
        # Recorded once the answer is on its way, so the client does not wait for it;
        # a send that failed is recorded all the same.
        if span is None:
            _audit_finished(d, session, call, tool.name, error, charges, latency_ms)
        else:  # the audit step timed here: a leaf of the call's span, which ends with it
            started = time.time_ns()
            try:
                _audit_finished(d, session, call, tool.name, error, charges, latency_ms)
            except BaseException as exc:
                span.audited(started, result, error, exc)
                raise
            span.audited(started, result, error)


async def _acquire_and_execute(
    d: Dispatch,
    session: Session,
    call: Call,
    tool: Any,
    arguments: Any,
    frame: CallToolFrame,
    events: bool,
) -> tuple[ToolContext, ToolResult]:
    # Plain acquire/release, and a queue only when a slot is not free at once.
    session_limiter, global_limiter = session.limiter, d.global_limiter
    if not session_limiter.try_acquire():
        d.suspending(session, call)
        await _queue_for(d, session_limiter)
    try:
        if not global_limiter.try_acquire():
            d.suspending(session, call)
            await _queue_for(d, global_limiter)
        try:
            call.run()
            context = _context(d, session, call, tool.name, frame, events)
            coro = tool.run(arguments, context)
            try:
                pending = coro.send(None)  # the tool's first step, here and now
            except StopIteration as done:
                result = done.value
            else:
                d.suspending(session, call)
                result = await _Rest(coro, pending)
            if tool.spill_results and may_spill(context, result):
                d.suspending(session, call)
                result = await spill_if_large(context, result)
            return context, result
        finally:
            global_limiter.release()
    finally:
        session_limiter.release()


def _outcome(
    call: Call,
    tool: str,
    result: ToolResult | None,
    error: ExaiError | None,
    latency_ms: float,
    trace_id: str | None = None,
) -> tuple[bytes, ExaiError | None]:
    """The encoded result frame, and the error it reports (None: success)."""
    if error is None and result is not None:
        try:
            return ok_result(call.request_id, tool, result, latency_ms, trace_id), None
        except (TypeError, ValueError) as exc:  # not a result the protocol can carry
            log.exception("tool returned an unsendable result")
            error = InternalError(f"{tool} returned an invalid result: {exc}")
    assert error is not None
    log.info("call failed", code=error.code.value,
             error=describe_error(error, content=tracing_state.content),
             latency_ms=round(latency_ms, 2))  # fmt: skip
    return dump_frame_bytes(error_result(call.request_id, tool, error, latency_ms,
                                         trace_id)), error  # fmt: skip


def _account(
    d: Dispatch,
    session: Session,
    call: Call,
    tool: str,
    result: ToolResult | None,
    error: ExaiError | None,
    context: ToolContext | None,
    latency_ms: float,
    trace_id: str | None = None,
) -> list[Charge]:
    """Count the call, queue a cost row per model call it made and the call's row of
    the request log; returns the charges."""
    d.metrics.call_finished(tool, "ok" if error is None else error.code.value, latency_ms / 1000)
    charges = context.charges if context is not None else []
    ledger = d.services.ledger
    if ledger is not None:
        thread = result.metadata.get("continuation_id") if result is not None else None
        thread_id = thread if isinstance(thread, str) else None
        if charges:  # every model call, whatever the call's outcome
            ledger.record(charges, principal=session.principal.name, tool=tool,
                          session_id=session.id, request_id=call.request_id,
                          thread_id=thread_id, trace_id=trace_id)  # fmt: skip
        log_call(ledger, session, call.request_id, tool, call.arguments, error, charges,
                 latency_ms, trace_id, thread_id)  # fmt: skip
    return charges


def _audit_finished(
    d: Dispatch,
    session: Session,
    call: Call,
    tool: str,
    error: ExaiError | None,
    charges: list[Charge],
    latency_ms: float,
) -> None:
    audit = d.services.audit
    if not isinstance(audit, NullAudit):
        # A call that never waited has no call_started: its digest is recorded here.
        started = {} if call.timer is not None else args_digest_fields(call.arguments)
        audit.emit("call_finished", session_id=session.id, request_id=call.request_id, tool=tool,
                   principal=session.principal.name, duration_ms=round(latency_ms, 3),
                   status="ok" if error is None else "error",
                   error_code=None if error is None else error.code.value,
                   **started, **charge_fields(charges))  # fmt: skip


def _deliver_now(
    d: Dispatch, session: Session, call: Call, data: bytes, error: ExaiError | None, now: float
) -> bool:
    """The call leaves the session; its result is sent now if the connection has room
    (False: it has to wait for room), then kept for a retry.

    Sent before it is kept, so the client is answered first. Nothing waits in
    between, so no frame is handled there: a retry of this call finds either
    the running call or its kept result.
    """
    call.finish()
    session.calls.pop(call.request_id, None)
    d.running.discard(call)
    session.last_seen = now
    sent = session.deliver_now(data)
    if call.ran:  # a call refused in the queue is not kept: its retry may run
        session.remember(call, data, now, error)
    return sent


async def _queue_for(d: Dispatch, limiter: Any) -> None:
    """Wait in ``limiter``'s bounded queue, recording how long it took."""
    waited = time.monotonic()
    if tracing_state.tracer is None:
        await limiter.acquire()
    else:
        with traced.queue_span(limiter):
            await limiter.acquire()
    d.metrics.queue_wait.observe(time.monotonic() - waited)


def _context(
    d: Dispatch, session: Session, call: Call, tool: str, frame: CallToolFrame, events: bool
) -> ToolContext:
    rid = call.request_id
    seq = 0

    async def progress(message: str, progress: float | None, total: float | None) -> None:
        await d.ack(session, call)
        call.last_progress = time.monotonic()
        await session.deliver(
            ProgressFrame(request_id=rid, message=message, progress=progress, total=total)
        )

    async def chunk(text: str) -> None:
        nonlocal seq
        await d.ack(session, call)
        call.last_progress = time.monotonic()
        await session.deliver(StreamChunk(request_id=rid, seq=seq, text=text))
        seq += 1

    event = None
    if events:

        async def event(delta: StreamEvent) -> None:
            call.last_progress = time.monotonic()
            await session.deliver(ModelEvent(rid, delta))

    return ToolContext(
        request_id=rid,
        session_id=session.id,
        fingerprint_of=call.fingerprint,
        principal=session.principal,
        tool=tool,
        deadline=call.deadline,
        services=d.services,
        log=log,
        stream_requested=frame.stream,
        progress_cb=progress,
        stream_cb=chunk,
        event_cb=event,
        client_roots=frame.roots or (),
    )


class _Rest:
    """The rest of a coroutine whose first step has run and yielded ``pending``.

    Awaiting it does what ``await coro`` would have done from that point on:
    every value the task sends and every exception it throws (a cancel) goes to
    the coroutine, and whatever the coroutine yields goes to the task. The run
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


def _cancelled(reason: StopReason | None, tool: str, timeout_s: float) -> ExaiError:
    if reason is StopReason.TIMEOUT:
        return TimeoutError_(f"{tool} did not finish within {timeout_s:g}s")
    if reason is StopReason.SHUTDOWN:
        return CancelledError("cancelled: the daemon is shutting down", retryable=True)
    return CancelledError("cancelled by the client")
