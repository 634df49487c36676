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

An error also marks the span the call was made under, so the face's span
shows that its call failed and with which code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from exai import tracing

if TYPE_CHECKING:
    from exai.daemon.call import Call
    from exai.daemon.session import Session
    from exai.errors import ExaiError
    from exai.tools.base import ToolResult

__all__ = ["CallSpan", "admission_span", "call_span", "queue_span"]


class CallSpan:
    """The ``execute_tool`` span of one call, current in the call's task while it runs."""

    __slots__ = ("parent", "span", "token", "trace_id")

    def __init__(self, span: tracing.Span, parent: tracing.Span) -> None:
        self.span = span
        self.parent = parent
        ctx = span.get_span_context()
        # Only a trace that is recorded is worth pointing a person at.
        self.trace_id = tracing.trace_id_of(span) if ctx.trace_flags.sampled else None
        self.token = otel_context.attach(trace.set_span_in_context(span))

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        with tracing.span(name):
            yield

    def end(self, result: ToolResult | None, error: ExaiError | None) -> None:
        sp = self.span
        if result is not None and sp.is_recording():
            tracing.set_attributes(sp, _result_attributes(result.metadata))
        if error is not None:
            tracing.fail(self.parent, error)
        tracing.finish(sp, error)
        with contextlib.suppress(ValueError):  # detached from another context: harmless
            otel_context.detach(self.token)


def call_span(session: Session, call: Call, tool: str) -> CallSpan | None:
    parent = trace.get_current_span()
    sp = tracing.start(
        f"execute_tool {tool}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "exai.principal": session.principal.name,
            "exai.session.id": session.id,
            "exai.request.id": call.request_id,
            "exai.timeout_s": call.timeout_s,
        },
    )
    return CallSpan(sp, parent) if sp is not None else None


def admission_span() -> Any:
    return tracing.span("admission")


def queue_span(limiter: Any) -> Any:
    return tracing.span("queue", attributes={"exai.limiter": getattr(limiter, "name", None),
                                             "exai.queue.waiting": limiter.waiting})  # fmt: skip


def _result_attributes(metadata: dict[str, Any]) -> dict[str, Any]:
    """What a result's metadata tells about the call, as span attributes."""
    usage: dict[str, Any] = metadata.get("usage") or {}
    cost: dict[str, Any] = metadata.get("cost") or {}
    if not isinstance(usage, dict) or not isinstance(cost, dict):  # a tool's own shapes
        usage, cost = {}, {}
    out: dict[str, Any] = {
        "gen_ai.conversation.id": metadata.get("continuation_id"),
        "gen_ai.response.model": metadata.get("model"),
        "exai.provider": metadata.get("provider"),
        "gen_ai.usage.input_tokens": usage.get("prompt_tokens"),
        "gen_ai.usage.output_tokens": usage.get("completion_tokens"),
        "gen_ai.usage.cache_read.input_tokens": usage.get("cached_prompt_tokens"),
        "exai.cache_hit": metadata.get("cache_hit"),
        "exai.cost.total": _number(cost.get("total")),
        "exai.cost.currency": cost.get("currency"),
        "exai.replayed": metadata.get("replayed") or None,
        "exai.fallback_from": metadata.get("fallback_from"),
    }
    return {k: v for k, v in out.items() if isinstance(v, str | bool | int | float)}


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
