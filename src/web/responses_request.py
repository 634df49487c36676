"""From an OpenAI Responses API request to one ``completion`` call, with no I/O.

What Codex 0.169.0 and the Agents SDK send, and what becomes of it
(docs/agents.md):

- ``input`` (items) and ``instructions``: converted to chat messages
  (:mod:`exai.web.responses_items`); the instructions are this request's alone
  and are not stored with it, as the API says;
- ``tools`` (functions, and Codex's namespaces of functions), ``tool_choice``,
  ``parallel_tool_calls``, ``max_output_tokens``, ``temperature``, ``top_p``,
  ``text.format``: applied; hosted tools (``web_search``...) are refused;
- ``reasoning.effort``: the call's ``reasoning_effort`` (the core sends each model
  the knob it has, a level or a thinking switch, and notes what it did);
  ``reasoning.summary`` asks for the reasoning
  in the reasoning item's summary; ``include: ["reasoning.encrypted_content"]``
  puts it in ``encrypted_content``, which brings it back with the next request;
- ``store`` (default true) keeps the answer in exai's conversation store under
  the response's id, and ``previous_response_id`` continues from one kept
  there, owner-checked like a thread; ``store: false`` is stateless;
- ``prompt_cache_key``, ``user``, ``safety_identifier`` and Codex's
  ``client_metadata`` identify the caller's session or user: they go into the
  audit trail (the vendors' prompt caching is automatic, by prefix);
- ``text.verbosity`` is adapted (no such knob: noted); anything else is refused
  naming the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from exai.web.model_call import (
    ModelCall,
    Note,
    RequestRefused,
    check_known,
    want_bool,
    want_dict,
    want_list,
    want_number,
    want_str,
)
from exai.web.model_shared import apply_thinking, client_ref, effort_level
from exai.web.reasoning_seal import Carriers
from exai.web.responses_items import ToolNames, convert_input, convert_tools

__all__ = ["RESPONSE_ID", "ResponsesCall", "parse_responses"]

RESPONSE_ID = re.compile(r"^resp_[A-Za-z0-9]{8,64}$")
_FIELDS = (
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "store",
    "previous_response_id",
    "reasoning",
    "text",
    "include",
    "prompt_cache_key",
    "user",
    "safety_identifier",
    "client_metadata",
    "truncation",
    "stream_options",
)
_INCLUDE = frozenset({"reasoning.encrypted_content"})


@dataclass(frozen=True)
class ResponsesCall(ModelCall):
    """The call for one ``/v1/responses`` request, and how to answer it."""

    response_id: str = ""
    store: bool = True
    previous_response_id: str | None = None
    summary: bool = False  # the reasoning goes into the reasoning item's summary
    encrypted: bool = False  # ... and into its encrypted_content
    names: ToolNames = field(default_factory=ToolNames)
    echo: dict[str, Any] = field(default_factory=dict)  # request fields the response repeats


def parse_responses(body: Any, response_id: str, carriers: Carriers) -> ResponsesCall:
    """The call for a ``/v1/responses`` body; raises :class:`RequestRefused`."""
    body = want_dict(body, "body")
    check_known(body, _FIELDS)
    model = want_str(body.get("model") or "auto", "model")
    notes: list[Note] = []
    messages = convert_input(body.get("input"), notes, carriers)
    if not messages:
        raise RequestRefused("input must hold at least one item", param="input")
    names = convert_tools(body.get("tools"))
    arguments: dict[str, Any] = {"model": model, "messages": messages}
    if body.get("instructions") is not None:
        arguments["instructions"] = want_str(body["instructions"], "instructions")
    if names.tools:
        arguments["tools"] = names.tools
    if body.get("tool_choice") is not None:
        arguments["tool_choice"] = _tool_choice(body["tool_choice"], names)
    if body.get("parallel_tool_calls") is not None:
        arguments["parallel_tool_calls"] = want_bool(
            body["parallel_tool_calls"], "parallel_tool_calls"
        )
    if body.get("max_output_tokens") is not None:
        arguments["max_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            arguments[key] = want_number(body[key], key)
    summary = _reasoning(body.get("reasoning"), arguments)
    notes += _text(body.get("text"), arguments)
    include = [
        want_str(i, f"include[{n}]")
        for n, i in enumerate(want_list(body.get("include") or [], "include"))
    ]
    for n, wanted in enumerate(include):
        if wanted not in _INCLUDE:
            raise RequestRefused(
                f"exai can include {sorted(_INCLUDE)} only",
                param=f"include[{n}]",
                code="unsupported_parameter",
            )
    if body.get("truncation") not in (None, "disabled"):
        raise RequestRefused(
            'exai does not cut the input: truncation can only be "disabled"',
            param="truncation",
            code="unsupported_parameter",
        )
    if body.get("stream_options") is not None:
        options = want_dict(body["stream_options"], "stream_options")
        check_known(options, ("include_obfuscation",), "stream_options.")
        if options.get("include_obfuscation"):
            raise RequestRefused(
                "exai does not pad stream events", param="stream_options.include_obfuscation"
            )
    store = body.get("store") is None or want_bool(body["store"], "store")
    previous = body.get("previous_response_id")
    if previous is not None:
        previous = want_str(previous, "previous_response_id")
        if not RESPONSE_ID.match(previous):
            raise RequestRefused(
                "previous_response_id names a response exai made (resp_...)",
                param="previous_response_id",
            )
        arguments["previous_response_id"] = previous
    if store:
        arguments["store_as"] = response_id
    stream = body.get("stream") is not None and want_bool(body["stream"], "stream")
    echo = {
        key: body.get(key)
        for key in (
            "instructions",
            "tool_choice",
            "parallel_tool_calls",
            "temperature",
            "top_p",
            "max_output_tokens",
            "reasoning",
            "text",
            "tools",
        )
    }
    return ResponsesCall(
        face="responses",
        arguments=arguments,
        model=model,
        stream=stream,
        notes=tuple(notes),
        client_ref=_client_ref(body),
        session_ref=_session_ref(body),
        response_id=response_id,
        store=store,
        previous_response_id=previous,
        summary=summary,
        encrypted="reasoning.encrypted_content" in include,
        names=names,
        echo=echo,
        carriers=carriers,
    )


def _tool_choice(raw: Any, names: ToolNames) -> Any:
    if raw in ("auto", "none", "required"):
        return raw
    choice = want_dict(raw, "tool_choice")
    if choice.get("type") != "function":
        raise RequestRefused(
            'tool_choice is "auto", "none", "required" or {"type": "function", "name": ...}',
            param="tool_choice",
        )
    check_known(choice, ("type", "name"), "tool_choice.")
    name = want_str(choice.get("name"), "tool_choice.name")
    if name not in {t["function"]["name"] for t in names.tools}:
        raise RequestRefused(
            f"tool_choice names {name!r}, which is not among the tools", param="tool_choice.name"
        )
    return {"type": "function", "function": {"name": name}}


def _reasoning(raw: Any, arguments: dict[str, Any]) -> bool:
    """Apply ``reasoning``; whether its summary is asked for."""
    if raw is None:
        return False
    reasoning = want_dict(raw, "reasoning")
    check_known(reasoning, ("effort", "summary", "generate_summary"), "reasoning.")
    effort = reasoning.get("effort")
    if effort is not None:
        apply_thinking(arguments, None, effort_level(effort, "reasoning.effort"))
    summary = reasoning.get("summary", reasoning.get("generate_summary"))
    if summary not in (None, "auto", "concise", "detailed"):
        raise RequestRefused(
            'reasoning.summary is "auto", "concise" or "detailed"', param="reasoning.summary"
        )
    return summary is not None


def _text(raw: Any, arguments: dict[str, Any]) -> list[Note]:
    if raw is None:
        return []
    text = want_dict(raw, "text")
    check_known(text, ("format", "verbosity"), "text.")
    notes = []
    if text.get("verbosity") not in (None, "medium"):
        if text["verbosity"] not in ("low", "high"):
            raise RequestRefused(
                'text.verbosity is "low", "medium" or "high"', param="text.verbosity"
            )
        notes.append(
            Note(
                "text.verbosity",
                "Kimi and GLM take no verbosity; the model wrote as long as it does",
            )
        )
    fmt = text.get("format")
    if fmt is None:
        return notes
    fmt = want_dict(fmt, "text.format")
    kind = fmt.get("type")
    if kind == "text":
        check_known(fmt, ("type",), "text.format.")
    elif kind == "json_object":
        check_known(fmt, ("type",), "text.format.")
        arguments["response_format"] = {"type": "json_object"}
    elif kind == "json_schema":
        check_known(fmt, ("type", "name", "schema", "strict", "description"), "text.format.")
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        arguments["response_format"] = {"type": "json_schema", "json_schema": schema}
    else:
        raise RequestRefused(
            'text.format.type is "text", "json_object" or "json_schema"', param="text.format.type"
        )
    return notes


def _client_ref(body: dict[str, Any]) -> str | None:
    """The caller's id for its user or session, for the audit trail."""
    ref = client_ref(body, ("safety_identifier", "user", "prompt_cache_key"))
    metadata = body.get("client_metadata")
    if ref is None and metadata is not None:
        metadata = want_dict(metadata, "client_metadata")
        for key in ("session_id", "thread_id"):
            if isinstance(metadata.get(key), str):
                return str(metadata[key])[:256]
    return ref


def _session_ref(body: dict[str, Any]) -> str | None:
    """The client's id for its conversation (Codex's ``prompt_cache_key`` is its
    session's id), which groups its requests as one agent session."""
    if isinstance(body.get("prompt_cache_key"), str):
        return str(body["prompt_cache_key"])[:256] or None
    metadata = body.get("client_metadata")
    if isinstance(metadata, dict):
        for key in ("session_id", "thread_id"):
            if isinstance(metadata.get(key), str):
                return str(metadata[key])[:256] or None
    return None
