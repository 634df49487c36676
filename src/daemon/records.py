"""What a call leaves on record: its row of the request log, and the digest of its
arguments that the audit trail keeps instead of their text.

Shared by admission (:mod:`exai.daemon.dispatch`: a refused call is on record
too) and the run (:mod:`exai.daemon.run`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from exai.audit import args_digest
from exai.errors import ExaiError
from exai.providers.pricing import to_nanos
from exai.store.call_log import CallLogRow

if TYPE_CHECKING:
    from exai.accounting.ledger import Charge
    from exai.daemon.session import Session

__all__ = ["args_digest_fields", "log_call"]


def log_call(
    ledger: Any, session: Session, request_id: str, tool: str, arguments: Any,
    error: ExaiError | None, charges: list[Charge], latency_ms: float,
    trace_id: str | None = None, thread_id: str | None = None,
) -> None:  # fmt: skip
    """Queue the call's one row of the request log (see :mod:`exai.store.call_log`).

    On every call's way out, so a call without a model call (most calls on the
    hottest path) only fills a tuple."""
    asked = arguments.get("model") if type(arguments) is dict else None
    model = provider = currency = None
    prompt = completion = cost = 0
    if charges:
        model = ", ".join(dict.fromkeys(charge.model for charge in charges))[:200]
        provider = ", ".join(dict.fromkeys(charge.provider for charge in charges))[:200]
        for charge in charges:  # a call's models share a currency; another one is left out
            prompt += charge.usage.prompt_tokens
            completion += charge.usage.completion_tokens
            if charge.cost is not None and currency in (None, charge.cost.currency):
                currency = charge.cost.currency
                cost += to_nanos(charge.cost.total)
    principal = session.principal
    ledger.log_call(CallLogRow(
        time.time(), ledger.instance_id, principal.name, principal.key_id, session.face,
        session.client, tool, asked[:200] if type(asked) is str else None, model, provider,
        len(charges), session.id, request_id, thread_id, prompt, completion, currency, cost,
        round(latency_ms, 3), "ok" if error is None else "error",
        None if error is None else error.code.value, trace_id,
    ))  # fmt: skip


def args_digest_fields(arguments: dict[str, Any]) -> dict[str, Any]:
    # The audit trail records a digest and the size of the arguments, never their text.
    digest, size = args_digest(arguments)
    return {"args_digest": digest, "args_bytes": size}
