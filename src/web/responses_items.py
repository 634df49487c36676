"""Responses API input items and tools as OpenAI chat messages and function tools.

The Responses API speaks in items: ``message`` items (user, developer, system,
assistant), ``function_call`` items the model made and the
``function_call_output`` items that answer them, and ``reasoning`` items. The
model under exai takes chat messages, so consecutive assistant items (its
reasoning, its text, its calls) become one assistant message with
``tool_calls`` and ``reasoning_content``, each output a tool message, each other
message a message of its role (``developer`` as ``system``).

Reasoning goes out as a ``reasoning`` item whose ``encrypted_content`` carries it
(when the request includes ``reasoning.encrypted_content``, as Codex does), so a
tool round's reasoning comes back with the round and reaches the model again.

Codex groups tools under a ``namespace`` (its MCP servers' tools, its
sub-agent tools); the model sees each as a function named
``<namespace>__<name>`` and its calls go back as ``function_call`` items with
``namespace`` and ``name`` apart (:class:`ToolNames`).

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from exai.web.model_call import Note, RequestRefused, check_known, want_dict, want_list, want_str
from exai.web.model_shared import open_carrier
from exai.web.reasoning_seal import Carriers, Opened

__all__ = [
    "SEPARATOR",
    "ToolNames",
    "convert_input",
    "convert_tools",
    "reasoning_of",
]

SEPARATOR = "__"
_MESSAGE_KEYS = ("type", "role", "content", "id", "status")
_CALL_KEYS = ("type", "call_id", "name", "arguments", "id", "status", "namespace")
_OUTPUT_KEYS = ("type", "call_id", "output", "id", "status")
_REASONING_KEYS = ("type", "id", "summary", "content", "encrypted_content", "status")
_FUNCTION_KEYS = ("type", "name", "description", "parameters", "strict")


def reasoning_of(item: dict[str, Any], carriers: Carriers) -> Opened:
    """A reasoning item's reasoning: what its sealed ``encrypted_content`` holds. Its
    summary and content are the client's to write, so they are never sent as the
    model's reasoning."""
    texts = [p.get("text") for key in ("content", "summary") for p in item.get(key) or []
             if isinstance(p, dict)]  # fmt: skip
    return open_carrier(carriers, item.get("encrypted_content"), shown=any(texts),
                        missing="it carries no encrypted_content exai made (ask for it with "
                                'include: ["reasoning.encrypted_content"])')  # fmt: skip


@dataclass
class ToolNames:
    """The functions the model sees, and the ``(namespace, name)`` each came from."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)

    def split(self, name: str) -> tuple[str | None, str]:
        """``(namespace, name)`` of a function the model called."""
        if name in self.namespaced:
            return self.namespaced[name]
        return None, name


def convert_tools(raw: Any) -> ToolNames:
    names = ToolNames()
    for index, tool in enumerate(want_list(raw if raw is not None else [], "tools")):
        where = f"tools[{index}]"
        tool = want_dict(tool, where)
        kind = tool.get("type")
        if kind == "function":
            names.tools.append(_function(tool, where, None))
        elif kind == "namespace":
            check_known(tool, ("type", "name", "description", "tools"), f"{where}.")
            namespace = want_str(tool.get("name"), f"{where}.name")
            for j, inner in enumerate(want_list(tool.get("tools") or [], f"{where}.tools")):
                inner = want_dict(inner, f"{where}.tools[{j}]")
                if inner.get("type") != "function":
                    raise RequestRefused(
                        "a namespace holds function tools only", param=f"{where}.tools[{j}]"
                    )
                function = _function(inner, f"{where}.tools[{j}]", namespace)
                names.namespaced[function["function"]["name"]] = (namespace, inner["name"])
                names.tools.append(function)
        else:
            hint = (
                ' (Codex: web_search = "disabled" in config.toml)' if kind == "web_search" else ""
            )
            raise RequestRefused(
                f"exai serves function tools, not OpenAI's hosted tool {kind!r}; leave it "
                f"out{hint}",
                param=where,
                code="unsupported_parameter",
            )
    return names


def _function(tool: dict[str, Any], where: str, namespace: str | None) -> dict[str, Any]:
    check_known(tool, _FUNCTION_KEYS, f"{where}.")
    name = want_str(tool.get("name"), f"{where}.name")
    function: dict[str, Any] = {
        "name": f"{namespace}{SEPARATOR}{name}" if namespace else name,
        "parameters": want_dict(
            tool.get("parameters") or {"type": "object", "properties": {}}, f"{where}.parameters"
        ),
    }
    if tool.get("description") is not None:
        function["description"] = want_str(tool["description"], f"{where}.description")
    if tool.get("strict") is not None:
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def convert_input(raw: Any, notes: list[Note], carriers: Carriers) -> list[dict[str, Any]]:
    """``input`` (a string, or items) as chat messages."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    out: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None  # the assistant message being gathered

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            out.append(pending)
            pending = None

    for index, item in enumerate(want_list(raw, "input")):
        where = f"input[{index}]"
        item = want_dict(item, where)
        kind = item.get("type", "message")
        if kind == "message":
            check_known(item, _MESSAGE_KEYS, f"{where}.")
            role = item.get("role")
            if role == "assistant":
                text = _text_of(item.get("content"), where, assistant=True)
                if pending is not None and (pending["content"] or pending.get("tool_calls")):
                    flush()
                pending = pending or {"role": "assistant", "content": ""}
                pending["content"] = text
                continue
            flush()
            if role not in ("user", "system", "developer"):
                raise RequestRefused(
                    'a message\'s role is "user", "system", "developer" or "assistant"',
                    param=f"{where}.role",
                )
            content = _content(item.get("content"), where)
            out.append({"role": "user" if role == "user" else "system", "content": content})
        elif kind == "function_call":
            check_known(item, _CALL_KEYS, f"{where}.")
            name = want_str(item.get("name"), f"{where}.name")
            if item.get("namespace"):
                name = f"{want_str(item['namespace'], f'{where}.namespace')}{SEPARATOR}{name}"
            pending = pending or {"role": "assistant", "content": ""}
            pending.setdefault("tool_calls", []).append(
                {
                    "id": want_str(item.get("call_id"), f"{where}.call_id"),
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": want_str(item.get("arguments", ""), f"{where}.arguments"),
                    },
                }
            )
        elif kind == "function_call_output":
            check_known(item, _OUTPUT_KEYS, f"{where}.")
            flush()
            output = item.get("output")
            images = []
            if isinstance(output, list):  # a tool message carries text: images follow it
                parts = [want_dict(p, f"{where}.output[{j}]") for j, p in enumerate(output)]
                images = [p for p in parts if p.get("type") == "input_image"]
                output = [p for p in parts if p.get("type") != "input_image"]
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": want_str(item.get("call_id"), f"{where}.call_id"),
                    "content": _text_of(output, f"{where}.output"),
                }
            )
            if images:
                out.append({"role": "user", "content": _content(images, f"{where}.output")})
                notes.append(
                    Note(
                        f"{where}.output",
                        "a tool message carries text only: the "
                        "images of this output follow it in a "
                        "user message",
                    )
                )
        elif kind == "reasoning":
            check_known(item, _REASONING_KEYS, f"{where}.")
            if pending is not None and (pending["content"] or pending.get("tool_calls")):
                flush()
            pending = pending or {"role": "assistant", "content": ""}
            opened = reasoning_of(item, carriers)
            if opened.text:
                before = pending.get("reasoning_content")
                text = opened.text
                pending["reasoning_content"] = f"{before}\n\n{text}" if before else text
            elif opened.why:
                notes.append(Note(where, "this reasoning was not sent as the model's: "
                                         f"{opened.why}"))  # fmt: skip
        else:
            raise RequestRefused(
                f"exai does not serve {kind!r} input items",
                param=where,
                code="unsupported_parameter",
            )
    flush()
    return out


def _content(content: Any, where: str) -> Any:
    """A user or system message's content: a string, or chat parts."""
    if isinstance(content, str):
        return content
    parts = []
    for j, part in enumerate(want_list(content, f"{where}.content")):
        at = f"{where}.content[{j}]"
        part = want_dict(part, at)
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            parts.append({"type": "text", "text": want_str(part.get("text"), f"{at}.text")})
        elif kind == "input_image":
            check_known(part, ("type", "image_url", "detail"), f"{at}.")
            image: dict[str, Any] = {"url": want_str(part.get("image_url"), f"{at}.image_url")}
            if part.get("detail") not in (None, "auto"):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        else:
            raise RequestRefused(
                f"exai does not serve {kind!r} content", param=at, code="unsupported_parameter"
            )
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _text_of(content: Any, where: str, assistant: bool = False) -> str:
    """Text content (an assistant message's, a function's output) as one string."""
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(want_list(content, where)):
        at = f"{where}[{j}]" if not assistant else f"{where}.content[{j}]"
        part = want_dict(part, at)
        if part.get("type") not in ("input_text", "output_text", "refusal"):
            raise RequestRefused(
                f"exai reads text here, not {part.get('type')!r}",
                param=at,
                code="unsupported_parameter",
            )
        texts.append(str(part.get("text") if "text" in part else part.get("refusal", "")))
    return "\n".join(texts)
