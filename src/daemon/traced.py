"""The core's spans of a call: admission, the call itself, its queue wait and its audit step.

Only called when tracing is on (:mod:`exai.daemon.run` and
:mod:`exai.daemon.dispatch` check ``exai.tracing.state.tracer`` first), so
nothing here is on the hot path of an untraced daemon. A call's spans sit
under the span of the face that took it (current when the call was submitted,
and inherited by the call's task):

- ``admission``: scopes, arguments and the rate limit, checked as the call
  arrives; failed with the error's code when the call is refused;
- ``execute_tool {tool}``: the call in the core, from its task's first step to
  its result (GenAI's tool execution span), with the principal, the session,
  the request, the thread, the model, the cost and the cache hit;
- ``queue``: a wait for capacity, only when the call had to wait;
- ``audit``: metrics, the cost rows and the ``call_finished`` event.

Admission and audit start no span inside them and need none current, so they
are leaves, timed where they run (:func:`admitted`, :meth:`CallSpan.audited`,
:func:`exai.tracing.step_done`) and sent in their parent's record. Under the
WebSocket face's span, the face's span itself becomes ``execute_tool``
(:meth:`exai.tracing.spans.RecordedSpan.nest`): the spans sent are the same.

An error also marks the span the call was made under, so the face's span
shows that its call failed and with which code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opentelemetry.trace import INVALID_SPAN

from exai import tracing
from exai.tracing.current import SPAN_KEY, current_context, enter, leave
from exai.tracing.spans import OK_STATUS, UNSET_STATUS, RecordedSpan

if TYPE_CHECKING:
    from exai.daemon.call import Call
    from exai.daemon.session import Session
    from exai.errors import ExaiError
    from exai.tools.base import ToolResult

__all__ = ["CallSpan", "admitted", "call_span", "queue_span"]


class CallSpan:
    """The ``execute_tool`` span of one call, current in the call's task while it runs."""

    __slots__ = ("ends_parent", "parent", "span", "token", "trace_id")
    trace_id: str | None  # the trace's id when it is recorded, for the call's result

    def __init__(self, span: tracing.Span, parent: tracing.Span, task: Any) -> None:
        self.span = span
        self.parent = parent
        if span is parent:  # the face's span, nested (RecordedSpan.nest): current already
            self.token = None
            self.ends_parent = False
            self.trace_id = span._head[0].to_bytes(16, "big").hex()
            return
        self.token = enter(span)
        if type(span) is RecordedSpan and type(parent) is RecordedSpan:  # in fewest steps
            self.trace_id = span._head[0].to_bytes(16, "big").hex()
            # A face's span that was to end when this task is done ends right after
            # this one instead, in the task's last step (tracing.take_over_end).
            if parent.ends_with is task:
                parent.ends_with = None
                self.ends_parent = task.remove_done_callback(parent.end_ok) == 1
            else:
                self.ends_parent = False
            return
        # Only a trace that is recorded is worth pointing a person at (exai's spans
        # are the sampled ones).
        sampled = type(span) is RecordedSpan or span.get_span_context().trace_flags.sampled
        self.trace_id = tracing.trace_id_of(span) if sampled else None
        self.ends_parent = tracing.take_over_end(parent, task)

    def audited(self, started: int, result: ToolResult | None, error: ExaiError | None,
                audit_error: BaseException | None = None) -> None:  # fmt: skip
        """The call's audit step, which began at ``started`` (``time.time_ns()``) and
        ends now (failed with ``audit_error``), a leaf of the call's span; then the
        call's span ends, as :meth:`end` ends it. Timed by the caller rather than in
        a block (:func:`exai.tracing.step_done`); in the common case (a face's span
        nested into the call's, no error) the leaf and the span end at one instant
        in one step (:meth:`~exai.tracing.spans.RecordedSpan.end_after`)."""
        sp: Any = self.span
        if audit_error is None and error is None and sp is self.parent:  # nested: RecordedSpan
            if result is not None and not _RESULT_SOURCES.isdisjoint(result.metadata):
                sp.set_attributes(_result_attributes(result.metadata))
            sp.end_after("audit", started)
            return
        tracing.step_done(sp, "audit", started, audit_error)
        self.end(result, error)

    def end(self, result: ToolResult | None, error: ExaiError | None) -> None:
        sp: Any = self.span
        if error is None and type(sp) is RecordedSpan:  # the common case, in fewest steps
            if result is not None and not _RESULT_SOURCES.isdisjoint(result.metadata):
                sp.set_attributes(_result_attributes(result.metadata))
            if sp.status is UNSET_STATUS:  # end_ok's rule, one call fewer
                sp.status = OK_STATUS
            sp.end()  # a nested face's span ends with it (RecordedSpan.nest)
            if self.token is not None:
                leave(self.token)
            if self.ends_parent:
                parent: Any = self.parent  # a RecordedSpan
                if parent.status is UNSET_STATUS:
                    parent.status = OK_STATUS
                parent.end()
            return
        parent = self.parent
        ends_parent = self.ends_parent
        if sp is parent:  # nested: the face's span is marked failed as a span of its own
            parent, ends_parent = sp.unnest(), True
        if result is not None and sp.is_recording():
            attributes = _result_attributes(result.metadata)
            if attributes:
                sp.set_attributes(attributes)
        if error is not None:
            tracing.fail(parent, error)
            tracing.finish(sp, error)
        elif type(sp) is RecordedSpan:
            sp.end_ok()
        else:
            tracing.finish(sp)
        if self.token is not None:
            leave(self.token)
        if ends_parent:
            parent.end_ok()  # a RecordedSpan


def call_span(session: Session, call: Call, tool: str) -> CallSpan | None:
    tracer = tracing.state.tracer
    if tracer is None:
        return None
    parent = current_context().get(SPAN_KEY)
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "exai.principal": session.principal.name,
        "exai.session.id": session.id,
        "exai.request.id": call.request_id,
        "exai.timeout_s": call.timeout_s,
    }
    task = call.task
    if type(parent) is RecordedSpan:  # under one of exai's spans (a face's)
        if (
            parent.ends_with is task
            and task is not None
            and tracer.inherits
            and parent.outer is None
            and parent.events is None
            and parent.links is None
        ):
            # The face's span, to end with this task: it becomes this call's span, its
            # face's kept in it (RecordedSpan.nest), and the task's context is left as
            # it is.
            parent.nest(f"execute_tool {tool}", attributes, task)
            return CallSpan(parent, parent, task)
        sp = tracer.child(parent, f"execute_tool {tool}", attributes)
    else:
        if not isinstance(parent, tracing.Span):
            parent = INVALID_SPAN
        sp = tracer.start_span(f"execute_tool {tool}", attributes=attributes)
    return CallSpan(sp, parent, task)


def admitted(started: int, error: BaseException | None = None) -> None:
    """The call's admission, which began at ``started`` (``time.time_ns()``) and ends
    now (failed with ``error``): a leaf of the face's span, which is current."""
    tracing.step_done(current_context().get(SPAN_KEY), "admission", started, error)


def queue_span(limiter: Any) -> Any:
    return tracing.span("queue", attributes={"exai.limiter": getattr(limiter, "name", None),
                                             "exai.queue.waiting": limiter.waiting})  # fmt: skip


_RESULT_KEYS = ("gen_ai.conversation.id", "gen_ai.response.model", "exai.provider",
                "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                "gen_ai.usage.cache_read.input_tokens", "exai.cache_hit", "exai.cost.total",
                "exai.cost.currency", "exai.replayed", "exai.fallback_from")  # fmt: skip
_PLAIN = frozenset({str, bool, int, float})
_EMPTY: dict[str, Any] = {}
# The metadata _result_attributes reads: a result with none of it (a tool that asked
# no model, like echo) has nothing to add.
_RESULT_SOURCES = frozenset({"continuation_id", "model", "provider", "usage", "cache_hit", "cost",
                             "replayed", "fallback_from"})  # fmt: skip


def _result_attributes(metadata: dict[str, Any]) -> dict[str, Any]:
    """What a result's metadata tells about the call, as span attributes (one pass,
    in this order, over values most of which are absent)."""
    if _RESULT_SOURCES.isdisjoint(metadata):
        return _EMPTY
    get = metadata.get
    usage: dict[str, Any] = get("usage") or _EMPTY
    cost: dict[str, Any] = get("cost") or _EMPTY
    if not isinstance(usage, dict) or not isinstance(cost, dict):  # a tool's own shapes
        usage = cost = _EMPTY
    total = cost.get("total")
    values = (get("continuation_id"), get("model"), get("provider"), usage.get("prompt_tokens"),
              usage.get("completion_tokens"), usage.get("cached_prompt_tokens"),
              get("cache_hit"), None if total is None else _number(total), cost.get("currency"),
              get("replayed") or None, get("fallback_from"))  # fmt: skip
    return {key: value for key, value in zip(_RESULT_KEYS, values, strict=True)
            if value is not None and (type(value) in _PLAIN
                                      or isinstance(value, str | bool | int | float))}  # fmt: skip


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
