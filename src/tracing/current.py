"""The current span, read and made current in one step each.

OpenTelemetry's API reaches the current span through four or five Python calls
(``get_current_span`` → ``get_value`` → ``get_current`` → the runtime context →
its ``ContextVar``), and making a span current through as many more plus a copy
of the ``Context``. On a traced call that ran some thirty times, the largest
part of tracing's cost in the daemon. The runtime context the API uses by
default (``ContextVarsRuntimeContext``) keeps the current ``Context`` as the
value of one ``ContextVar``; this module finds that variable once, at import,
by attaching a probe context through the public API and looking for it among
the variables of the running context, and then reads and sets it directly.

What is current is therefore still OpenTelemetry's own current context, the
same object: ``opentelemetry.trace.get_current_span()`` in any code (a tool, a
library, an instrumentation) sees exactly the span exai made current, tasks
inherit it as they always did, and a span another tracer made current is seen
by exai. When the API runs another runtime context (``OTEL_PYTHON_CONTEXT``)
the probe finds nothing and every function here is the API's own call.
"""

from __future__ import annotations

import contextvars
from contextvars import ContextVar, Token
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span

__all__ = [
    "SPAN_KEY",
    "current_context",
    "current_span",
    "enter",
    "leave",
    "set_context",
    "span_in",
    "variable",
]

# The key the API stores the current span under (a name with a random suffix,
# made when opentelemetry.trace is imported), read back through its public call.
SPAN_KEY: Final = next(iter(trace.set_span_in_context(INVALID_SPAN, Context())))


def _find_variable() -> ContextVar[Context] | None:
    probe = Context({"exai-probe": True})
    token = otel_context.attach(probe)
    try:
        for var, value in contextvars.copy_context().items():
            if value is probe:
                return var
        return None
    finally:
        otel_context.detach(token)


_VAR: Final = _find_variable()


def variable() -> ContextVar[Context] | None:
    """The ``ContextVar`` holding OpenTelemetry's current context, or None when the
    API runs a runtime context of another kind."""
    return _VAR


def span_in(context: Context) -> Span:
    """The span ``context`` carries (``trace.get_current_span(context)``)."""
    sp = context.get(SPAN_KEY)
    return sp if isinstance(sp, Span) else INVALID_SPAN


if _VAR is not None:
    _get, _set, _reset = _VAR.get, _VAR.set, _VAR.reset
    # ``otel_context.get_current()``, as the variable's own method (no Python call).
    current_context = _get
    # ``otel_context.attach(context)``, the same way: for a caller that made the context
    # from the current one it already holds (:func:`enter` reads it again).
    set_context = _set

    def current_span() -> Span:
        """``trace.get_current_span()``."""
        sp = _get().get(SPAN_KEY)
        return sp if sp is not None and isinstance(sp, Span) else INVALID_SPAN

    def enter(sp: Span) -> Token[Context]:
        """``attach(set_span_in_context(sp))``: ``sp`` is current until :func:`leave`."""
        return _set(Context({**_get(), SPAN_KEY: sp}))

    def leave(token: Token[Context]) -> None:
        """``detach(token)``; a token from another context is the API's to report
        (it logs it, as it always did), never an error here."""
        try:
            _reset(token)
        except ValueError:
            otel_context.detach(token)

else:  # pragma: no cover - only with OTEL_PYTHON_CONTEXT naming another runtime context
    current_context = otel_context.get_current  # type: ignore[assignment]
    set_context = otel_context.attach

    def current_span() -> Span:
        return trace.get_current_span()

    def enter(sp: Span) -> Token[Context]:
        return otel_context.attach(trace.set_span_in_context(sp))

    def leave(token: Token[Context]) -> None:
        otel_context.detach(token)
