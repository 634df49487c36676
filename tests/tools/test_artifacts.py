"""Large results: stored as artifacts, summarized, and paged back intact."""

from __future__ import annotations

import itertools
import json
import random
import uuid
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exai.protocol import ErrorCode
from exai.store.tokens import estimator_for
from exai.tools.artifacts import page_budget, page_end, page_starts
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult
from tests.conftest import emulated_providers, make_settings, running_daemon

LIMIT = 1000  # the smallest EXAI_MAX_RESULT_TOKENS, so the texts stay small
estimate = estimator_for("generic").text


def _mixed_text(seed: int, lines: int) -> str:
    """ASCII prose and code, CJK, emoji sequences, combining marks, CRLF and tabs."""
    rng = random.Random(seed)
    pieces = ["def f(x):\treturn x", "naïve café", "数据库连接池", "👩‍💻🚀", "e\u0301",
              "plain words here", "{\"k\": [1, 2]}", "Ωμέγα", "x" * 70]  # fmt: skip
    ends = ["\n", "\r\n", " "]
    return "".join(
        f"{i}: " + " ".join(rng.choices(pieces, k=rng.randint(1, 6))) + rng.choice(ends)
        for i in range(lines)
    )


TEXT = _mixed_text(1, 400)
REASONING = _mixed_text(2, 150)


class BigInput(ToolInput):
    kind: Literal["text", "reasoning"] = "text"


class BigTool(Tool):
    name = "big"
    description = "Returns a large text, or a small one with a long reasoning field."
    Input = BigInput
    profile = "lean"

    async def run(self, arguments: BigInput, context: ToolContext) -> ToolResult:
        if arguments.kind == "reasoning":
            return ToolResult("short answer", {"reasoning": REASONING})
        return ToolResult(TEXT)


@pytest.fixture
def config(tmp_path):
    return make_settings(tmp_path, max_result_tokens=LIMIT, ws_tokens="alice=ta,bob=tb")


def _response_tokens(res) -> int:
    texts = "".join(o.text for o in res.outputs)
    return estimate(texts) + estimate(json.dumps(res.metadata.model_dump(), ensure_ascii=False))


async def _read_pages(client, handle: dict, **first) -> list[str]:
    pages, arguments = [], {**handle, **first}
    while True:
        res = await client.call("artifact", arguments)
        assert res.error is None, res.error
        assert estimate(res.outputs[0].text) <= page_budget(LIMIT)
        assert _response_tokens(res) <= LIMIT
        pages.append(res.outputs[0].text)
        if not res.metadata.has_more:
            assert "end of artifact" in res.outputs[1].text
            return pages
        arguments = {**handle, "offset": res.metadata.next_offset}


async def test_a_large_result_becomes_a_summary_and_pages_back_intact(config, client_factory):
    async with running_daemon(config, extra_tools=[BigTool()]) as daemon:
        alice = await client_factory(daemon, "ta")
        res = await alice.call("big", {})
        assert res.error is None, res.error
        meta = res.metadata
        handle = {"artifact_id": meta.artifact_id, "continuation_id": meta.continuation_id}
        summary = res.outputs[0].text
        assert _response_tokens(res) <= LIMIT and estimate(TEXT) > 10 * LIMIT
        assert summary.startswith(TEXT[: meta.artifact["shown_chars"]])
        assert f"read it in {meta.artifact['pages']} page(s)" in summary
        assert json.dumps({**handle, "page": 1}) in summary

        by_offset = await _read_pages(alice, handle)
        assert "".join(by_offset) == TEXT
        by_page = []
        for number in range(1, meta.artifact["pages"] + 1):
            page = await alice.call("artifact", {**handle, "page": number})
            assert page.error is None and page.metadata.page == number, page
            by_page.append(page.outputs[0].text)
        assert by_page == by_offset  # the pages cut when storing are the pages read
        (thread,) = await daemon.services.store.list_threads()
        assert thread.id == meta.continuation_id and thread.owner == "alice"


async def test_another_principal_cannot_read_an_artifact(config, client_factory):
    async with running_daemon(config, extra_tools=[BigTool()]) as daemon:
        alice = await client_factory(daemon, "ta")
        bob = await client_factory(daemon, "tb")
        meta = (await alice.call("big", {})).metadata
        handle = {"artifact_id": meta.artifact_id, "continuation_id": meta.continuation_id}
        refused = await bob.call("artifact", handle)
        assert refused.error.code == ErrorCode.CONVERSATION_NOT_FOUND
        assert refused.outputs == []
        unknown = await alice.call("artifact", {**handle, "artifact_id": str(uuid.uuid4())})
        assert unknown.error.code == ErrorCode.CONVERSATION_NOT_FOUND


async def test_a_long_metadata_field_is_stored_apart(config, client_factory):
    async with running_daemon(config, extra_tools=[BigTool()]) as daemon:
        alice = await client_factory(daemon, "ta")
        res = await alice.call("big", {"kind": "reasoning"})
        assert [o.text for o in res.outputs] == ["short answer"]
        assert getattr(res.metadata, "reasoning", None) is None
        assert _response_tokens(res) <= LIMIT
        handle = {"artifact_id": res.metadata.spilled_fields["reasoning"],
                  "continuation_id": res.metadata.continuation_id}  # fmt: skip
        assert "".join(await _read_pages(alice, handle)) == REASONING


async def test_a_large_model_answer_stays_with_its_conversation(tmp_path, provider_emulator,
                                                                client_factory):  # fmt: skip
    provider_emulator.reset()
    config = make_settings(
        tmp_path, max_result_tokens=LIMIT, **emulated_providers(provider_emulator)
    )
    prompt = _mixed_text(3, 300)
    async with running_daemon(config) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": prompt})
        assert res.error is None and res.metadata.artifact_id
        cid = res.metadata.continuation_id
        (thread,) = await daemon.services.store.list_threads()
        stored = await daemon.services.store.messages(cid, "anonymous")
        assert thread.id == cid and [m.role for m in stored] == ["user", "assistant"]
        pages = await _read_pages(client, {"artifact_id": res.metadata.artifact_id,
                                           "continuation_id": cid})  # fmt: skip
    assert "".join(pages) == stored[1].content


async def test_small_results_pass_untouched(config, client_factory):
    async with running_daemon(config) as daemon:
        client = await client_factory(daemon, "ta")
        res = await client.call("echo", {"text": "é" * 200})
        assert res.outputs[0].text == "é" * 200
        assert getattr(res.metadata, "artifact_id", None) is None
        assert await daemon.services.store.list_threads() == []


@pytest.mark.parametrize(
    ("extra", "problem"),
    [({"page": 1, "offset": 0}, "not both"), ({"page": 999}, "page(s), not 999"),
     ({"offset": 10**9}, "past the end")],
)  # fmt: skip
async def test_bad_page_requests_are_validation_errors(config, client_factory, extra, problem):
    async with running_daemon(config, extra_tools=[BigTool()]) as daemon:
        alice = await client_factory(daemon, "ta")
        meta = (await alice.call("big", {})).metadata
        handle = {"artifact_id": meta.artifact_id, "continuation_id": meta.continuation_id}
        res = await alice.call("artifact", {**handle, **extra})
        assert res.error.code == ErrorCode.VALIDATION_ERROR and problem in res.error.message


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=400), budget=st.integers(min_value=4, max_value=60))
def test_pages_cover_the_text_and_each_fits_its_budget(text, budget):
    starts = page_starts(text, budget)
    bounds = [*starts, len(text)]
    pages = [text[a:b] for a, b in itertools.pairwise(bounds)]
    assert starts[0] == 0 and "".join(pages) == text
    assert all(estimate(page) <= budget for page in pages)
    for start, page in zip(starts, pages, strict=True):  # reading from a start finds the same page
        assert page_end(text[start:], budget) == len(page)
