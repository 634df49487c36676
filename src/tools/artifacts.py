"""Large results: kept with the conversation as artifacts and read back in pages.

MCP clients refuse a tool response above roughly 25,000 tokens, so a result
over ``EXAI_MAX_RESULT_TOKENS`` would reach the agent as an error and be lost.
:func:`spill_if_large` runs on every result the daemon is about to send (from
the tools whose ``spill_results`` is on): a result within the limit passes
untouched; a bigger one is stored as an artifact of the call's conversation (a
new thread owned by the caller when the result names none) and replaced by its
beginning, a note saying what happened, and a handle in the metadata. Long
string fields of the metadata (a thinking model's ``reasoning``) are stored the
same way. The ``artifact`` tool then returns the text a page at a time, each
page small enough to fit under the limit, and to another principal the artifact
does not exist (``CONVERSATION_NOT_FOUND``).

Sizes are upper-bound estimates (the ``generic`` estimator of
:mod:`exai.store.tokens`): an undercount would let through a response the
client then refuses. Offsets count characters, as the store does.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import to_json

from exai.errors import ValidationError_
from exai.logs import get_logger
from exai.protocol import UUID_PATTERN, ResultFields
from exai.store.tokens import MAX_CHARS_PER_TOKEN, estimator_for
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult

__all__ = [
    "ARTIFACT_TOOL",
    "TOOLS",
    "ArtifactInput",
    "ArtifactTool",
    "may_spill",
    "page_budget",
    "page_end",
    "page_starts",
    "spill_if_large",
]

ARTIFACT_TOOL = "artifact"
# Of the limit, a page of an artifact leaves this much (at least _PAGE_RESERVE
# tokens) for the note and the metadata around it: two UUIDs alone are priced
# at about 70 tokens, a token per digit and dash.
_PAGE_RESERVE_SHARE = 0.1
_PAGE_RESERVE = 500
# The beginning of a spilled result shown in its place gets this share.
_SUMMARY_SHARE = 0.1
# A metadata string costing more than this share of the limit is stored apart.
_FIELD_SHARE = 0.1
# A page prefers to end at a line end found in its last eighth.
_LINE_END_SLACK = 8

_estimate = estimator_for("generic").text
log = get_logger("exai.tools")


def page_budget(limit: int) -> int:
    """Tokens one page of an artifact may cost under a result limit of ``limit``."""
    return limit - max(int(limit * _PAGE_RESERVE_SHARE), _PAGE_RESERVE)


def _window(budget: int) -> int:
    """Characters that can never all fit in ``budget``: each costs at least 1/3 token."""
    return int(budget * MAX_CHARS_PER_TOKEN) + 1


def page_end(window: str, budget: int) -> int:
    """How many leading characters of ``window`` make a page within ``budget`` tokens.

    A pure function of its arguments, so the pages cut when an artifact is stored
    are the pages read back. The estimate is not monotonic in the length (a long
    run of letters is priced higher once it looks like base64), so every cut is
    checked rather than inferred. Always at least one character, so paging ends.
    """
    if _estimate(window) <= budget:
        return len(window)
    fits, over = 0, len(window)
    while over - fits > 1:
        middle = (fits + over) // 2
        if _estimate(window[:middle]) <= budget:
            fits = middle
        else:
            over = middle
    line_end = window.rfind("\n", fits - fits // _LINE_END_SLACK, fits)
    if line_end >= 0 and _estimate(window[: line_end + 1]) <= budget:
        return line_end + 1
    return max(fits, 1)


def page_starts(text: str, budget: int) -> list[int]:
    """The offset each page of ``text`` starts at."""
    starts, offset, width = [], 0, _window(budget)
    while offset < len(text):
        starts.append(offset)
        offset += page_end(text[offset : offset + width], budget)
    return starts


@dataclass(frozen=True, slots=True)
class _Spill:
    """What storing one large text needs, computed off the event loop."""

    tokens: int
    starts: list[int]
    shown: int  # characters of the beginning shown in the result's place


def _plan(text: str, limit: int) -> _Spill:
    summary = int(limit * _SUMMARY_SHARE)
    shown = page_end(text[: _window(summary)], summary)
    return _Spill(_estimate(text), page_starts(text, page_budget(limit)), shown)


def _json(value: Any) -> str:
    # Compact JSON from pydantic-core, as the result frame is sent; far cheaper than json.dumps.
    return to_json(value, fallback=str).decode() if value else ""


def may_spill(context: ToolContext, result: ToolResult) -> bool:
    """Whether ``result`` could be over the result limit; False is certain.

    A token costs at least one UTF-8 byte and a character at most four bytes, so a
    result whose text and metadata fit in a quarter of the limit in characters is
    never over it. Checked on every call, without awaiting anything.
    """
    text = result.text
    chars = len(text) if isinstance(text, str) else sum(map(len, text))
    limit = context.services.settings.max_result_tokens
    if 4 * chars <= limit and (
        not result.metadata or 4 * (chars + len(_json(result.metadata))) <= limit
    ):
        return False
    return context.services.store is not None


async def spill_if_large(context: ToolContext, result: ToolResult) -> ToolResult:
    """``result``, or its summary and handle when it is over the result limit."""
    if not may_spill(context, result):
        return result
    limit = context.settings.max_result_tokens
    texts = result.texts
    meta_json = _json(result.metadata)
    text = "\n\n".join(texts)
    text_tokens = await _off_loop(_estimate, text)
    if text_tokens + await _off_loop(_estimate, meta_json) <= limit:
        return result
    try:
        return await _spill(context, result, text, text_tokens, limit)
    except Exception:  # keep the answer: a WebSocket client can still take it whole
        context.log.exception("storing a large result failed; sending it whole")
        return result


async def _spill(
    context: ToolContext, result: ToolResult, text: str, text_tokens: int, limit: int
) -> ToolResult:
    store = context.services.store
    metadata = dict(result.metadata)
    thread_id = metadata.get("continuation_id")
    if not thread_id:
        thread = await store.create_thread(context.principal.name, title=f"{context.tool} result")
        thread_id = thread.id
    metadata["continuation_id"] = thread_id
    source = {"tool": context.tool, "request_id": context.request_id}

    fields: dict[str, str] = {}
    for key, value in result.metadata.items():
        if isinstance(value, str) and await _off_loop(_estimate, value) > limit * _FIELD_SHARE:
            plan = await _off_loop(_plan, value, limit)
            fields[key] = await store.put_artifact(
                thread_id, value, _meta(source, plan, limit, key)
            )
            del metadata[key]
    if fields:
        metadata["spilled_fields"] = fields
    if text_tokens + _estimate(_json(metadata)) <= limit:
        return ToolResult(result.text, metadata)

    plan = await _off_loop(_plan, text, limit)
    artifact_id = await store.put_artifact(thread_id, text, _meta(source, plan, limit))
    metadata.update(ResultFields(artifact_id=artifact_id).fields())
    metadata["artifact"] = {
        "chars": len(text),
        "estimated_tokens": plan.tokens,
        "pages": len(plan.starts),
        "shown_chars": plan.shown,
    }
    call = json.dumps({"artifact_id": artifact_id, "continuation_id": thread_id, "page": 1})
    note = (
        f"[exai: this result is about {plan.tokens:,} tokens, over the {limit:,}-token limit "
        f"for one response. Above are its first {plan.shown:,} of {len(text):,} characters. "
        f"The whole result is stored: read it in {len(plan.starts)} page(s) with the "
        f"{ARTIFACT_TOOL} tool, starting with {call}.]"
    )
    context.log.info("result stored as artifact", artifact_id=artifact_id, tokens=plan.tokens)
    return ToolResult(f"{text[: plan.shown]}\n\n{note}", metadata)


def _meta(
    source: dict[str, Any], plan: _Spill, limit: int, field: str | None = None
) -> dict[str, Any]:
    """What the artifact tool needs to page the artifact back as it was cut."""
    meta = {**source, "estimated_tokens": plan.tokens, "page_starts": plan.starts}
    meta["page_tokens"] = page_budget(limit)
    if field is not None:
        meta["metadata_field"] = field
    return meta


async def _off_loop(function: Any, *args: Any) -> Any:
    """Run CPU work over a large text on a thread, so other calls keep moving."""
    if sum(len(a) for a in args if isinstance(a, str)) < 200_000:
        return function(*args)
    return await asyncio.to_thread(function, *args)


class ArtifactInput(ToolInput):
    artifact_id: str = Field(min_length=1, max_length=64)
    continuation_id: str = Field(pattern=UUID_PATTERN)
    page: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = Field(
        default=None, description="Default 1."
    )
    offset: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = Field(
        default=None, description="A next_offset."
    )


class ArtifactTool(Tool):
    name = ARTIFACT_TOOL
    description = (
        "Read a large exai result page by page: a result too large for one response says "
        "its artifact_id and continuation_id."
    )
    Input = ArtifactInput
    profile = "lean"
    always_on = True
    spill_results = False  # its pages are cut to fit already

    async def run(self, arguments: ArtifactInput, context: ToolContext) -> ToolResult:
        if arguments.page is not None and arguments.offset is not None:
            raise ValidationError_("give page or offset, not both")
        store, owner = context.services.store, context.principal.name
        cid, aid = arguments.continuation_id, arguments.artifact_id
        budget = page_budget(context.settings.max_result_tokens)
        head = await store.get_artifact(cid, aid, owner, limit=0)
        starts: list[int] | None = head.meta.get("page_starts")
        if starts is None:  # stored by something other than spill_if_large
            whole = await store.get_artifact(cid, aid, owner)
            starts = await _off_loop(page_starts, whole.content, budget)
        if arguments.offset is None:
            number = arguments.page or 1
            if number > len(starts):
                raise ValidationError_(f"artifact {aid} has {len(starts)} page(s), not {number}")
            offset = starts[number - 1]
            end = starts[number] if number < len(starts) else head.size
            page = await store.get_artifact(cid, aid, owner, offset=offset, limit=end - offset)
            content = page.content
        else:
            offset = arguments.offset
            if offset >= head.size:
                raise ValidationError_(
                    f"offset {offset} is past the end of artifact {aid} ({head.size} characters)"
                )
            window = await store.get_artifact(cid, aid, owner, offset=offset, limit=_window(budget))
            content = window.content[: await _off_loop(page_end, window.content, budget)]
        next_offset = offset + len(content)
        has_more = next_offset < head.size
        metadata = {
            "continuation_id": cid,
            "artifact_id": aid,
            "offset": offset,
            "next_offset": next_offset if has_more else None,
            "has_more": has_more,
            "page": starts.index(offset) + 1 if offset in starts else None,
            "pages": len(starts),
            "chars": head.size,
        }
        return ToolResult([content, _page_note(metadata, next_offset)], metadata)


def _page_note(metadata: dict[str, Any], end: int) -> str:
    """Where the page sits, for agents that read only the text of a result."""
    page, offset, size = metadata["page"], metadata["offset"], metadata["chars"]
    where = f"page {page} of {metadata['pages']}" if page else "a page"
    after = f'next: {{"offset": {end}}}' if metadata["has_more"] else "end of artifact"
    return f"[{where}; characters {offset:,}-{end:,} of {size:,}; {after}]"


TOOLS: list[Tool] = [ArtifactTool()]
