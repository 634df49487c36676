"""What the three model faces do alike, written once.

OpenAI chat completions (:mod:`exai.web.openai`), the Anthropic Messages API
(:mod:`exai.web.anthropic`) and the OpenAI Responses API (:mod:`exai.web.responses`)
differ in their shapes, not in these:

- reading a request: an effort level checked against the levels an API names,
  the thinking switch and the effort as the arguments of ``completion``, the
  caller's id for its end user (``client_ref``, for the audit trail), and the
  reasoning a client brought back in a sealed carrier;
- answering: the model's answer as the result declares it
  (:class:`~exai.protocol.ModelAnswer`), the reasoning sealed for the client to
  bring back, and ``exai``, the object each answer carries beside the API's own
  fields (the model that answered, its cost, what exai adapted...).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from exai.protocol import EFFORTS, CallToolResult, ModelAnswer
from exai.web.model_call import ModelCall, Note, RequestRefused, want_str
from exai.web.reasoning_seal import Carriers, Opened

__all__ = [
    "answer_notes",
    "apply_thinking",
    "client_ref",
    "effort_level",
    "exai_envelope",
    "open_carrier",
    "seal_reasoning",
]


# --- requests ---------------------------------------------------------------------


def effort_level(value: Any, param: str, levels: Sequence[str] = EFFORTS) -> str:
    """``value`` as an effort level of ``levels`` (the core's, unless the API names fewer)."""
    if value not in levels:
        raise RequestRefused(f"{param} is one of {list(levels)}", param=param)
    return str(value)


def apply_thinking(arguments: dict[str, Any], switch: Any, effort: str | None) -> None:
    """The request's thinking switch and effort level as arguments of ``completion``.

    ``switch`` is the API's ``thinking.type``: ``enabled`` and ``disabled`` turn
    thinking on or off; anything else (none, Anthropic's ``adaptive``) leaves the
    model's default. The core fits the effort to the model (and notes what it adapts).
    """
    if effort is not None:
        arguments["reasoning_effort"] = effort
    if switch in ("enabled", "disabled"):
        arguments["thinking_mode"] = "on" if switch == "enabled" else "off"


def client_ref(body: Mapping[str, Any], keys: Iterable[str], where: str = "") -> str | None:
    """The first of ``keys`` the body sets: the caller's id for its end user or session,
    for the audit trail (at most 256 characters)."""
    for key in keys:
        if body.get(key) is not None:
            return want_str(body[key], f"{where}{key}")[:256]
    return None


def open_carrier(carriers: Carriers, carrier: Any, *, shown: bool, missing: str) -> Opened:
    """The reasoning a carrier (a thinking block's ``signature``, a reasoning item's
    ``encrypted_content``) brought back, or why none is sent: the carrier's own
    failure, or ``missing`` when there is none and the client wrote reasoning of its
    own (``shown``), which is never sent as the model's."""
    opened = carriers.open(carrier)
    if opened.text or opened.why or not shown:
        return opened
    return Opened(why=missing)


# --- answers ----------------------------------------------------------------------


def seal_reasoning(call: ModelCall, reasoning: str) -> str:
    """The reasoning, sealed for the caller to bring back with its next request."""
    assert call.carriers is not None, "a face that hands reasoning out has carriers"
    return call.carriers.seal(reasoning)


def answer_notes(call: ModelCall, answer: ModelAnswer, *more: Note) -> list[dict[str, str]]:
    """What the face (the request's notes, then ``more``) and the core adapted."""
    return [n.as_dict() for n in (*call.notes, *more)] + [dict(n) for n in answer.notes]


def exai_envelope(
    result: CallToolResult,
    answer: ModelAnswer,
    notes: list[dict[str, Any]],
    *,
    head: Mapping[str, Any] | None = None,
    tail: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``exai`` object of an answer: the audit trail's ``request_id`` (then the
    face's ``head``), the model that answered and its provider, the cost (null when
    unpriced), the model first chosen when a fallback answered, the turns a thread
    left out, the trace, the notes (then the face's ``tail``)."""
    meta = result.metadata
    fields: dict[str, Any] = {"request_id": result.request_id, **(head or {})}
    fields.update(model=meta.model, provider=meta.provider, cost=meta.cost)
    if answer.fallback_from:
        fields["fallback_from"] = answer.fallback_from
    if answer.turns_dropped:
        fields["turns_dropped"] = answer.turns_dropped
    if answer.trace_id:
        fields["trace_id"] = answer.trace_id
    if notes:
        fields["notes"] = notes
    fields.update(tail or {})
    return fields
