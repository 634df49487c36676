"""From a ``call_tool`` frame to exactly one ``call_tool_res``: admission.

``Dispatcher.submit`` checks the request (replay, tool, scope, arguments,
rate), and either answers it at once (a replay, a refusal) or admits it as a
:class:`~exai.daemon.call.Call` and starts the task that runs it
(:mod:`exai.daemon.run`: capacity, the tool under its deadline, the outcome,
accounting, delivery), so calls on one connection run concurrently and finish
in any order. Cancels, deadlines and the progress heartbeat act on calls
through their state.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import pydantic

from exai import tracing
from exai.accounting.limits import burst_for
from exai.daemon import traced
from exai.daemon.answers import error_result, replayed
from exai.daemon.call import Call, StopReason
from exai.daemon.records import args_digest_fields, log_call
from exai.daemon.replay import KEEP_REQUEST_MAX_CHARS, call_fingerprint
from exai.daemon.run import run_call
from exai.errors import (
    ExaiError,
    ForbiddenError,
    OverCapacityError,
    RequestIdReusedError,
    ToolNotFoundError,
    ValidationError_,
)
from exai.keys import KeyRing
from exai.limits import CapacityLimiter, TokenBucket
from exai.protocol import CallToolAck, CallToolFrame, ProgressFrame, describe_validation_error
from exai.tools.base import NullAudit, Services
from exai.tools.registry import ToolRegistry
from exai.tracing import state as tracing_state

if TYPE_CHECKING:
    from exai.daemon.session import Session
    from exai.metrics import DaemonMetrics

__all__ = ["Dispatcher"]


class Dispatcher:
    def __init__(
        self,
        services: Services,
        registry: ToolRegistry,
        metrics: DaemonMetrics,
        global_limiter: CapacityLimiter,
        *,
        shared_rates: Any = None,
        keys: KeyRing | None = None,
    ) -> None:
        """``shared_rates``: the rate counts shared with other daemons on a Postgres
        store (exai.cluster.ClusterState), else None; ``keys``: the operator's keys
        (exai.daemon.keys), so a call made with a key revoked since its session
        opened is refused."""
        self.services = services
        self.settings = services.settings
        self.registry = registry
        self.metrics = metrics
        self.global_limiter = global_limiter
        self._buckets: dict[str, TokenBucket] = {}
        self.shared_rates = shared_rates
        self.running: set[Call] = set()
        self.draining = False
        self.keys = keys
        self._background: set[asyncio.Future[None]] = set()
        self._beating: set[Call] = set()  # calls whose heartbeat is still being sent
        # asyncio.get_running_loop() costs a getpid() system call on Python 3.11.
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- admission --------------------------------------------------------

    def submit(
        self, session: Session, frame: CallToolFrame, raw: str | None = None, *,
        events: bool = False,
    ) -> asyncio.Task[None] | None:  # fmt: skip
        """Admit a call and start its task, or answer it at once; never waits.

        Called for each ``call_tool`` as it arrives (see :mod:`exai.ws.transport`).
        A ``request_id`` this session already used is a retry only if it asks for
        the same tool with the same arguments, and the principal may still call
        that tool: then it is attached to the running call or answered from the
        replay cache. Anything else under a used id is refused. ``raw`` is the
        frame's text, when there is one: kept instead of a fingerprint if it is
        small. ``events``: the caller (an in-process face) takes structured model
        events rather than text chunks. Returns the task of an admitted call (None:
        answered at once), which a face may watch to end its own span.
        """
        rid = frame.request_id
        try:
            running = session.calls.get(rid)
            if running is not None:  # a retry of a call still running: attach to it
                self._check_retry(session, frame, running.fingerprint())
                session.post(CallToolAck(request_id=rid, timeout_s=running.timeout_s))
                return None
            finished = session.replay(rid)
            if finished is not None:
                self._check_retry(session, frame, finished.fingerprint)
                session.post(replayed(finished.result))
                return None
            if tracing_state.tracer is None:
                tool, arguments = self._admit(session, frame)
            else:  # timed here, not in a block: every traced call runs it
                started = time.time_ns()
                try:
                    tool, arguments = self._admit(session, frame)
                except BaseException as exc:
                    traced.admitted(started, exc)
                    raise
                traced.admitted(started)
        except ExaiError as exc:
            self._refuse(session, frame, exc)
            return None

        s = self.settings
        timeout_s = min(frame.timeout_s or s.default_timeout_s, s.max_timeout_s)
        now = time.monotonic()
        call = Call(rid, tool.name, timeout_s, deadline=now + timeout_s, started=now,
                    asked=frame.name, arguments=frame.arguments,
                    request=raw if raw is not None and len(raw) <= KEEP_REQUEST_MAX_CHARS
                    else None, last_progress=now)  # fmt: skip
        session.calls[rid] = call
        self.running.add(call)
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.get_running_loop()
        call.task = loop.create_task(
            run_call(self, session, call, tool, arguments, frame, events),
            name=f"call:{session.id}:{rid}",
        )
        return call.task

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
        trace_id = None
        if tracing_state.tracer is not None:  # the face's span: the refused call's trace
            tracing.fail_current(exc)
            trace_id = tracing.trace_id()
        ledger = self.services.ledger
        if ledger is not None:
            log_call(ledger, session, frame.request_id, frame.name[:128], frame.arguments, exc,
                     [], 0.0, trace_id)  # fmt: skip
        session.post(error_result(frame.request_id, frame.name, exc, 0.0, trace_id))

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
        if session.principal.key_id is not None and self.keys is not None:
            self.keys.check(session.principal.key_id, time.time())
        tool = self._authorize(session, frame.name)
        try:
            arguments = tool.Input.model_validate(frame.arguments)
        except pydantic.ValidationError as exc:
            listed, details = describe_validation_error(exc, whole="(arguments)", listed=8)
            raise ValidationError_(
                f"invalid arguments for {tool.name}: {listed}", details=details
            ) from None
        principal = session.principal
        ledger = self.services.ledger
        limits = ledger.limits if ledger is not None else None
        own = limits.rate_for(principal) if limits is not None else principal.rate_per_min
        if own is not None or self.settings.rate_limit_per_min > 0:
            self._rate_limit(principal.name, own, principal.key_id)
        return tool, arguments

    def _rate_limit(self, principal: str, own: float | None, key_id: str | None) -> None:
        """Take a token from the principal's bucket: at its own rate when its key or
        the operator set one (exai.accounting.limits), else EXAI_RATE_LIMIT_PER_MIN."""
        s = self.settings
        rate = s.rate_limit_per_min if own is None else own
        # A key with its own rate has a bucket of its own beside its principal's.
        name = principal if key_id is None or own is None else f"{principal}\x00{key_id}"
        bucket = self._buckets.get(name)
        if bucket is None or bucket.rate != rate / 60.0:
            burst = s.rate_limit_burst if own is None else burst_for(
                own, s.rate_limit_per_min, s.rate_limit_burst)  # fmt: skip
            fresh = TokenBucket(rate / 60.0, burst)
            if bucket is not None:  # a changed rate: what was spent stays spent
                extra = max(0.0, fresh.burst - bucket.burst)
                fresh.tokens = min(fresh.burst, bucket.tokens + extra)
            bucket = self._buckets[name] = fresh
        shared = self.shared_rates  # counts across daemons, with a Postgres store
        if shared is not None:
            shared.check_rate(principal, own)
        bucket.take()
        if shared is not None:
            shared.spend_rate(principal)

    # --- acknowledgements, deadlines, cancels -------------------------------

    def suspending(self, session: Session, call: Call) -> None:
        """The call is about to wait for the first time: arm its deadline, record that
        it started, and ack it.

        A call that completes in its first step (version, echo, most rejections)
        needs none of it: it is answered by its call_tool_res alone, recorded by its
        ``call_finished`` event alone, and never had a timer to arm and cancel.
        Those are most calls on the hottest path. Every place a call can first wait
        calls this just before (idempotent).
        """
        if call.timer is not None or call.finished:
            return
        call.timer = asyncio.get_running_loop().call_at(
            _loop_deadline(call.deadline), self._expire, call
        )
        audit = self.services.audit
        if not isinstance(audit, NullAudit):  # a call that may run long: on record now
            audit.emit("call_started", session_id=session.id, request_id=call.request_id,
                       tool=call.tool, principal=session.principal.name,
                       **args_digest_fields(call.arguments))  # fmt: skip
        if not call.acked:
            self._background_task(self.ack(session, call))

    async def ack(self, session: Session, call: Call) -> None:
        # Checked again here: the call may have finished before this task ran, and
        # an ack must never follow its result.
        if call.finished or call.acked:
            return
        call.acked = True
        await session.deliver(CallToolAck(request_id=call.request_id, timeout_s=call.timeout_s))

    def _expire(self, call: Call) -> None:
        if call.task is not None and call.stop(StopReason.TIMEOUT):
            call.task.cancel()

    def cancel(
        self, session: Session, request_id: str, reason: StopReason = StopReason.CANCEL
    ) -> bool:
        call = session.calls.get(request_id)
        if call is None or call.task is None or call.task.done():
            return False
        if call.stop(reason):
            call.task.cancel()
        return True

    # --- the heartbeat ------------------------------------------------------

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
                    self._background_task(self._beat(session, call, now - call.started))

    async def _beat(self, session: Session, call: Call, elapsed: float) -> None:
        try:
            await self.ack(session, call)
            if not call.finished:  # checked after the ack: no frame may follow the result
                await session.deliver(
                    ProgressFrame(
                        request_id=call.request_id,
                        message=f"{call.tool} running ({elapsed:.0f}s)",
                    )
                )
        finally:
            self._beating.discard(call)

    def _background_task(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _label(self, name: str) -> str:
        # Unknown names must not create unbounded label sets.
        return name if self.registry.get(name) is not None else "unknown"


def _loop_deadline(monotonic_deadline: float) -> float:
    loop = asyncio.get_running_loop()
    return loop.time() + (monotonic_deadline - time.monotonic())
