"""From an Anthropic Messages API request to one ``completion`` call, with no I/O.

What Claude Code 2.1.330 sends, and what becomes of it (docs/agents.md):

- ``model``: an Anthropic name is served by the model EXAI_ANTHROPIC_MODELS
  maps it to (``claude-*=auto`` by default: exai's routing chooses); any other
  name (``kimi-k2.6``, an alias) is used as it is;
- ``system``, ``messages``: converted block by block (:mod:`exai.web.anthropic_blocks`);
- ``tools`` (client tools with ``input_schema``) become function tools; one
  marked ``defer_loading`` is offered to the model once a ``tool_reference`` in a
  tool result has loaded it, as Anthropic does; server tools are refused;
- ``tool_choice`` (``auto``, ``any``, ``tool``, ``none``,
  ``disable_parallel_tool_use``), ``max_tokens``, ``stop_sequences``,
  ``temperature``, ``top_p``: applied;
- ``thinking``: ``enabled`` and ``disabled`` switch the model's thinking,
  ``adaptive`` leaves it to the model; ``display: "omitted"`` sends thinking
  blocks without their text; ``budget_tokens`` is adapted (Kimi and GLM take no
  budget: noted);
- ``output_config``: ``format`` (a JSON schema) is the response format;
  ``effort`` is the call's ``reasoning_effort`` (the core sends each model the
  knob it has, a level or a thinking switch, and notes what it did); without
  one, the latest turn's own ``output_config.effort`` is, and where the two
  differ the request's wins (noted);
- ``context_management``: ``clear_thinking`` edits are applied to the history;
- ``metadata.user_id`` goes into the audit trail as the client's reference;
- ``cache_control`` marks are served by the vendors' automatic prefix caching;
- anything else is refused naming the field.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from typing import Any

from exai.web.anthropic_blocks import EFFORTS, Converted, convert_messages, system_text
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

__all__ = ["MessagesCall", "model_rules", "parse_count_tokens", "parse_messages", "served_model"]

_FIELDS = (
    "model",
    "messages",
    "system",
    "max_tokens",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "thinking",
    "metadata",
    "context_management",
    "output_config",
)
_COUNT_FIELDS = (
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "context_management",
    "output_config",
)
_TOOL_KEYS = (
    "type",
    "name",
    "description",
    "input_schema",
    "cache_control",
    "defer_loading",
    "strict",
)


@dataclass(frozen=True)
class MessagesCall(ModelCall):
    """The call for one ``/v1/messages`` request, and how to answer it."""

    show_thinking: bool = True  # False: thinking blocks go without their text


def model_rules(setting: str) -> list[tuple[str, str]]:
    """EXAI_ANTHROPIC_MODELS as ``(pattern, model)`` pairs, in order."""
    pairs = (p.strip().partition("=") for p in setting.split(",") if p.strip())
    return [(pattern.strip(), model.strip()) for pattern, _, model in pairs]


def served_model(name: str, rules: list[tuple[str, str]]) -> str:
    """The model exai serves the asked ``name`` with: the first rule that matches, else it."""
    for pattern, model in rules:
        if fnmatch.fnmatchcase(name.lower(), pattern.lower()):
            return model
    return name


def parse_messages(body: Any, rules: list[tuple[str, str]], carriers: Carriers) -> MessagesCall:
    """The call for a ``/v1/messages`` body; raises :class:`RequestRefused`."""
    body = want_dict(body, "body")
    check_known(body, _FIELDS)
    asked = want_str(body.get("model"), "model")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise RequestRefused("max_tokens must be a positive integer", param="max_tokens")
    arguments, notes, show = _common(body, served_model(asked, rules), carriers)
    arguments["max_tokens"] = max_tokens
    if body.get("stop_sequences") is not None:
        stops = want_list(body["stop_sequences"], "stop_sequences")
        arguments["stop"] = [want_str(s, f"stop_sequences[{i}]") for i, s in enumerate(stops)]
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            arguments[key] = want_number(body[key], key)
    stream = body.get("stream") is not None and want_bool(body["stream"], "stream")
    metadata = body.get("metadata")
    ref = None
    if metadata is not None:
        check_known(want_dict(metadata, "metadata"), ("user_id",), "metadata.")
        ref = client_ref(metadata, ("user_id",), "metadata.")
    return MessagesCall(
        face="anthropic",
        arguments=arguments,
        model=asked,
        stream=stream,
        notes=tuple(notes),
        client_ref=ref,
        session_ref=claude_session(ref),
        show_thinking=show,
        carriers=carriers,
    )


def parse_count_tokens(
    body: Any, rules: list[tuple[str, str]], carriers: Carriers
) -> dict[str, Any]:
    """The ``completion`` arguments whose prompt ``/v1/messages/count_tokens`` counts."""
    body = want_dict(body, "body")
    check_known(body, _COUNT_FIELDS)
    model = served_model(want_str(body.get("model"), "model"), rules)
    arguments, _, _ = _common(body, model, carriers)
    return arguments


def _common(
    body: dict[str, Any], model: str, carriers: Carriers
) -> tuple[dict[str, Any], list[Note], bool]:
    """What a message request and a token count share: model, messages, tools, thinking."""
    converted = convert_messages(body.get("messages"), carriers)
    notes = list(converted.notes)
    show_thinking = _thinking(body.get("thinking"), converted, notes)
    _context_management(body.get("context_management"), converted)
    messages = converted.messages
    if body.get("system") is not None:
        system = system_text(body["system"])
        if system:
            messages = [{"role": "system", "content": system}, *messages]
    arguments: dict[str, Any] = {"model": model, "messages": messages}
    tools = _tools(body.get("tools"), converted)
    if tools:
        arguments["tools"] = tools
    arguments.update(_tool_choice(body.get("tool_choice"), {t["function"]["name"] for t in tools}))
    effort, more = _output_config(body.get("output_config"), arguments, converted.efforts)
    apply_thinking(arguments, (body.get("thinking") or {}).get("type"), effort)
    return arguments, notes + more, show_thinking


def _tools(raw: Any, converted: Converted) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for index, tool in enumerate(want_list(raw if raw is not None else [], "tools")):
        where = f"tools[{index}]"
        tool = want_dict(tool, where)
        if tool.get("type") not in (None, "custom"):
            raise RequestRefused(
                f"exai serves client tools only, not Anthropic's server tool {tool['type']!r}; "
                "leave it out (Claude Code: turn the feature off)",
                param=where,
                code="unsupported_parameter",
            )
        check_known(tool, _TOOL_KEYS, f"{where}.")
        name = want_str(tool.get("name"), f"{where}.name")
        if tool.get("defer_loading") and name not in converted.loaded_tools:
            continue  # offered once a tool_reference loads it
        function: dict[str, Any] = {
            "name": name,
            "parameters": want_dict(tool.get("input_schema"), f"{where}.input_schema"),
        }
        if tool.get("description") is not None:
            function["description"] = want_str(tool["description"], f"{where}.description")
        if tool.get("strict") is not None:
            function["strict"] = want_bool(tool["strict"], f"{where}.strict")
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(raw: Any, names: set[str]) -> dict[str, Any]:
    if raw is None:
        return {}
    choice = want_dict(raw, "tool_choice")
    check_known(choice, ("type", "name", "disable_parallel_tool_use"), "tool_choice.")
    out: dict[str, Any] = {}
    if choice.get("disable_parallel_tool_use") is not None:
        disable = want_bool(
            choice["disable_parallel_tool_use"], "tool_choice.disable_parallel_tool_use"
        )
        out["parallel_tool_calls"] = not disable
    kind = choice.get("type")
    if kind == "auto":
        out["tool_choice"] = "auto"
    elif kind == "any":
        out["tool_choice"] = "required"
    elif kind == "none":
        out["tool_choice"] = "none"
        out.pop("parallel_tool_calls", None)
    elif kind == "tool":
        name = want_str(choice.get("name"), "tool_choice.name")
        if name not in names:
            raise RequestRefused(
                f"tool_choice names {name!r}, which is not among the tools",
                param="tool_choice.name",
            )
        out["tool_choice"] = {"type": "function", "function": {"name": name}}
    else:
        raise RequestRefused(
            'tool_choice.type is "auto", "any", "tool" or "none"', param="tool_choice.type"
        )
    if not names and out.get("tool_choice") not in (None, "auto", "none"):
        raise RequestRefused(
            "tool_choice asks for a tool call, and no tool is offered", param="tool_choice"
        )
    return out


def _thinking(raw: Any, converted: Converted, notes: list[Note]) -> bool:
    """Check ``thinking``; whether thinking blocks carry their text."""
    if raw is None:
        return True
    thinking = want_dict(raw, "thinking")
    check_known(thinking, ("type", "budget_tokens", "display"), "thinking.")
    kind = thinking.get("type")
    if kind not in ("enabled", "disabled", "adaptive"):
        raise RequestRefused(
            'thinking.type is "enabled", "disabled" or "adaptive"', param="thinking.type"
        )
    if thinking.get("budget_tokens") is not None:
        notes.append(
            Note(
                "thinking.budget_tokens",
                "Kimi and GLM take no thinking budget; the model thought as long as it does",
            )
        )
    display = thinking.get("display")
    if display not in (None, "summarized", "omitted"):
        raise RequestRefused(
            'thinking.display is "summarized" or "omitted"', param="thinking.display"
        )
    return display != "omitted"


def _context_management(raw: Any, converted: Converted) -> None:
    """Apply ``clear_thinking`` edits: keep the reasoning of the last N turns only."""
    if raw is None:
        return
    management = want_dict(raw, "context_management")
    check_known(management, ("edits",), "context_management.")
    for index, edit in enumerate(want_list(management.get("edits") or [], "edits")):
        where = f"context_management.edits[{index}]"
        edit = want_dict(edit, where)
        if edit.get("type") != "clear_thinking_20251015":
            raise RequestRefused(
                f"exai applies clear_thinking_20251015 edits only, not {edit.get('type')!r}",
                param=f"{where}.type",
                code="unsupported_parameter",
            )
        check_known(edit, ("type", "keep"), f"{where}.")
        keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
        if keep == "all":
            continue
        keep = want_dict(keep, f"{where}.keep")
        value = keep.get("value")
        if keep.get("type") != "thinking_turns" or not isinstance(value, int) or value < 0:
            raise RequestRefused(
                'keep is "all" or {"type": "thinking_turns", "value": N}', param=f"{where}.keep"
            )
        turns = [
            m for m in converted.messages if m["role"] == "assistant" and m.get("reasoning_content")
        ]
        for message in turns[: max(0, len(turns) - value)]:
            message.pop("reasoning_content")


def _output_config(
    raw: Any, arguments: dict[str, Any], turn_efforts: list[tuple[str, str]]
) -> tuple[str | None, list[Note]]:
    """Apply ``output_config``'s format; the effort level of the request or its latest turn."""
    config = want_dict(raw, "output_config") if raw is not None else {}
    check_known(config, ("effort", "format"), "output_config.")
    notes = []
    effort = config.get("effort")
    if effort is not None:
        effort = effort_level(effort, "output_config.effort", EFFORTS)
    # An earlier turn's level was for that turn; the latest one's is this request's.
    turn = turn_efforts[-1] if turn_efforts else None
    if effort is None and turn is not None:
        effort = turn[1]
    elif turn is not None and turn[1] != effort:
        used = f"the request's output_config.effort {effort!r} was used, not this turn's"
        notes.append(Note(turn[0], f"{used} {turn[1]!r}"))
    if config.get("format") is not None:
        fmt = want_dict(config["format"], "output_config.format")
        check_known(fmt, ("type", "schema"), "output_config.format.")
        if fmt.get("type") != "json_schema":
            raise RequestRefused(
                'output_config.format.type is "json_schema"', param="output_config.format.type"
            )
        schema = want_dict(fmt.get("schema"), "output_config.format.schema")
        arguments["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": schema},
        }
    return effort, notes


_SESSION = re.compile(r"session_([0-9A-Za-z-]{8,64})$")


def claude_session(user_id: str | None) -> str | None:
    """The session in Claude Code's ``metadata.user_id``: a JSON object's
    ``session_id`` (2.x), or the ``..._session_<uuid>`` tail of the older string; any
    other client's user id names a user, not a session."""
    if not user_id:
        return None
    try:
        parsed = json.loads(user_id)
    except ValueError:
        found = _SESSION.search(user_id)
        return found.group(1) if found else None
    session = parsed.get("session_id") if isinstance(parsed, dict) else None
    return session[:256] if isinstance(session, str) and session else None
