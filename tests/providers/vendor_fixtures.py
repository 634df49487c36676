"""What exai makes of the vendors' own answers, read from JSON fixtures.

The fixtures under tests/fixtures/vendors/ are of two sorts, one shape:

- ``kimi/``, ``glm/``: what Moonshot's and Z.ai's pages and SDK examples show,
  verbatim (each names its ``source``), with ``expect``: what exai must make of it;
- ``recorded/<vendor>/``: exchanges ``make vendor-check --record`` wrote from
  the live APIs, secrets masked, without ``expect``: there, exai's reading is
  compared with a plain reading of the same JSON (:func:`plain_reading`).

A fixture has ``vendor``, ``kind`` ("completion", "stream", "error" or "other"),
``status``, and ``body`` (a completion, an error body) or ``chunks`` (the data
of each SSE event of a stream). :func:`exai_reading` passes it through exai's
readers: :func:`exai.providers.wire.round_from_completion`,
:class:`exai.providers.wire.StreamAssembler`, and
:func:`exai.providers.error_mapping.status_error` with the plugin's classifier.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from exai.providers.error_mapping import Classifier, status_error
from exai.providers.glm import _classify as glm_classify
from exai.providers.kimi import KimiProvider
from exai.providers.wire import Round, StreamAssembler, round_from_completion

__all__ = ["FIXTURES", "exai_reading", "fixture_paths", "load", "plain_reading", "replay_recorded"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vendors"

# What an HTTP status may mean to exai, whatever the vendor's words.
_KINDS_BY_STATUS = {
    400: {"bad_request", "context_length"},
    401: {"auth"},
    403: {"permission", "balance"},
    404: {"not_found"},
    422: {"bad_request", "context_length"},
    429: {"rate_limit", "balance"},
}


def fixture_paths(root: Path = FIXTURES) -> list[Path]:
    return sorted(root.rglob("*.json"))


def load(path: Path) -> dict[str, Any]:
    fixture = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(fixture, dict) and fixture.get("source"), f"{path}: no source"
    assert fixture.get("vendor") in ("kimi", "glm"), f"{path}: vendor"
    return fixture


def _classifier(vendor: str) -> Classifier:
    if vendor == "glm":
        return glm_classify
    return KimiProvider(api_key=None)._classify


def _round(fixture: dict[str, Any]) -> Round:
    if fixture["kind"] == "stream":
        assembler = StreamAssembler()
        for chunk in fixture.get("chunks") or []:
            if isinstance(chunk, dict):
                assembler.feed(chunk)
        return assembler.result()
    return round_from_completion(fixture.get("body") or {})


def exai_reading(fixture: dict[str, Any]) -> dict[str, Any]:
    """What exai makes of the fixture, in the shape of its ``expect``."""
    if fixture["kind"] == "error":
        error = status_error(
            provider=fixture["vendor"], label=fixture["vendor"], status=fixture["status"],
            headers=fixture.get("headers"), body=fixture.get("body"),
            classify=_classifier(fixture["vendor"]),
        )  # fmt: skip
        return {"error": type(error).__name__, "kind": error.details["kind"],
                "retryable": error.retryable}  # fmt: skip
    if fixture["kind"] not in ("completion", "stream"):
        return {}
    got = _round(fixture)
    return {
        "text": got.text,
        "reasoning": got.reasoning,
        "finish_reason": got.finish_reason,
        "tool_calls": [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in got.tool_calls
        ],
        "usage": {
            "prompt_tokens": got.usage.prompt_tokens,
            "completion_tokens": got.usage.completion_tokens,
            "cached_prompt_tokens": got.usage.cached_prompt_tokens,
        },
        "search_results": got.search_results,
    }


def plain_reading(fixture: dict[str, Any]) -> dict[str, Any]:
    """The same reading of a completion or a stream done plainly, by hand, for the
    recorded fixtures: content and reasoning joined, the last finish_reason, each
    call's first id and first name with its arguments joined, the usage of the
    last chunk that has one (at the top or in its choice), cached tokens where
    either vendor puts them."""
    if fixture["kind"] == "completion":
        return _plain_completion(fixture.get("body") or {})
    return _plain_stream([c for c in fixture.get("chunks") or [] if isinstance(c, dict)])


def _plain_completion(body: dict[str, Any]) -> dict[str, Any]:
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        calls.append({"id": call.get("id") or "", "name": function.get("name") or "",
                      "arguments": _text(function.get("arguments"))})  # fmt: skip
    usage = body.get("usage") or choice.get("usage")
    return _plain(message.get("content"), message.get("reasoning_content"),
                  choice.get("finish_reason"), calls, usage, body.get("web_search"))  # fmt: skip


def _plain_stream(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    text: list[str] = []
    reasoning: list[str] = []
    finish: str | None = None
    usage: dict[str, Any] | None = None
    search: list[Any] = []
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        search += chunk.get("web_search") or []
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or "")
            finish = choice.get("finish_reason") or finish
            usage = chunk.get("usage") or choice.get("usage") or usage
            for piece in delta.get("tool_calls") or []:
                empty = {"id": "", "name": "", "arguments": ""}
                call = calls.setdefault(int(piece.get("index", len(calls))), empty)
                function = piece.get("function") or {}
                call["id"] = call["id"] or piece.get("id") or ""
                call["name"] = call["name"] or function.get("name") or ""
                call["arguments"] += _text(function.get("arguments"))
    ordered = [calls[i] for i in sorted(calls)]
    return _plain("".join(text), "".join(reasoning), finish, ordered, usage, search)


def _text(arguments: Any) -> str:
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _plain(
    text: Any, reasoning: Any, finish: Any, calls: list[dict[str, str]], usage: Any, search: Any
) -> dict[str, Any]:
    usage = usage or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or usage.get(
        "cached_tokens"
    ) or 0  # fmt: skip
    return {
        "text": text or "",
        "reasoning": reasoning or "",
        "finish_reason": finish,
        "tool_calls": calls,
        "usage": {
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
            "cached_prompt_tokens": int(cached),
        },
        "search_results": list(search or []),
    }


def replay_recorded(fixture: dict[str, Any]) -> None:
    """Asserts exai reads a recorded exchange as it reads plainly, and maps a
    recorded error to a kind its status allows (a 5xx: a retryable server failure)."""
    assert fixture["kind"] in ("completion", "stream", "error", "other"), fixture["kind"]
    assert fixture["request"]["body"], "the request is recorded"
    if fixture["kind"] == "error":
        reading = exai_reading(fixture)
        status = fixture["status"]
        if status >= 500:
            assert reading["kind"] == "server" and reading["retryable"], reading
        else:
            assert reading["kind"] in _KINDS_BY_STATUS.get(status, {"bad_request"}), reading
    elif fixture["kind"] != "other":
        assert exai_reading(fixture) == plain_reading(fixture)
