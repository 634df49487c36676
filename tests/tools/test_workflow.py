"""The workflow engine through a real daemon and the provider emulator: steps
without model calls, one expert call at the end, state kept with the conversation."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from exai.protocol import ErrorCode
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult
from exai.tools.turn import TurnRequest, run_turn
from exai.tools.workflow import TOOLS
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.tools.workflow_helpers import WORKFLOW_TOOLS, payload, sent_text, step, tool_extras


@pytest.fixture
def wf_settings(tmp_path, emulator):
    def build(**overrides):
        values = {**emulated_providers(emulator), "tool_profile": "full", **overrides}
        return make_settings(tmp_path, **values)

    return build


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "cache.py"
    path.write_text("CACHE = {}\n\ndef get(key):\n    return CACHE.get(key)\n")
    return path


def test_every_workflow_tool_is_registered():
    assert sorted(t.name for t in TOOLS) == sorted(WORKFLOW_TOOLS)


@pytest.mark.parametrize("tool", WORKFLOW_TOOLS)
async def test_steps_call_no_model_and_the_final_step_calls_one(
    tool, wf_settings, emulator, source, tmp_path, client_factory
):
    extras = tool_extras(tool, tmp_path)
    files = {"files_checked": [str(source)], "relevant_files": [str(source)]}
    issue = {"severity": "high", "description": "STALE-ENTRIES", "location": f"{source}:4"}
    async with running_daemon(wf_settings()) as daemon:
        client = await client_factory(daemon)
        first = payload(await client.call(tool, step(
            1, 3, tool=tool, findings="FINDING-ONE", issues_found=[issue], **files, **extras
        )))  # fmt: skip
        cid = first["continuation_id"]
        assert uuid.UUID(cid) and first["status"] == "in_progress"
        assert first["next"]["step_number"] == 2 and first["next"]["investigate"]
        second = payload(await client.call(tool, step(
            2, 3, tool=tool, cid=cid, findings="FINDING-TWO", relevant_context=["get()"], **extras
        )))  # fmt: skip
        assert second["consolidated"]["findings"] == ["step 1: FINDING-ONE", "step 2: FINDING-TWO"]
        assert emulator.requests == []
        final = await client.call(tool, step(
            3, 3, tool=tool, cid=cid, final=True, findings="FINDING-THREE", confidence="high",
            **extras,
        ))  # fmt: skip
        result = payload(final)
    assert len(emulator.requests) == 1
    assert result["status"] == "complete" and result["expert_analysis"].startswith("emulated")
    assert final.metadata.continuation_id == cid and final.metadata.provider
    sent = sent_text(emulator.requests[0])
    for expected in ("FINDING-ONE", "FINDING-TWO", "FINDING-THREE", "[high] STALE-ENTRIES",
                     "get()", "   4│     return CACHE.get(key)"):  # fmt: skip
        assert expected in sent, expected
    system = emulator.requests[0]["body"]["messages"][0]
    assert system["role"] == "system"
    assert system["content"] == next(t for t in TOOLS if t.name == tool).expert_role


async def test_a_workflow_continues_after_a_daemon_restart(wf_settings, emulator, source,
                                                           client_factory):  # fmt: skip
    settings = wf_settings()
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        cid = payload(await client.call("codereview", step(
            1, 3, findings="BEFORE-RESTART", relevant_files=[str(source)]
        )))["continuation_id"]  # fmt: skip
        await client.call("codereview", step(2, 3, cid=cid, findings="STILL-BEFORE"))
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        out_of_order = await client.call("codereview", step(2, 3, cid=cid))
        assert out_of_order.error.code == ErrorCode.VALIDATION_ERROR
        last = step(3, 3, cid=cid, final=True, findings="AFTER-RESTART")
        final = payload(await client.call("codereview", last))
    assert final["consolidated"]["relevant_files"] == [str(source)]
    assert len(emulator.requests) == 1
    sent = sent_text(emulator.requests[0])
    assert "BEFORE-RESTART" in sent and "STILL-BEFORE" in sent and "AFTER-RESTART" in sent
    assert "return CACHE.get(key)" in sent


@pytest.mark.parametrize("principals", ["one principal, two sessions", "two principals"])
async def test_concurrent_reviews_never_see_each_other(principals, wf_settings, emulator, tmp_path,
                                                       client_factory):  # fmt: skip
    two = principals == "two principals"
    settings = wf_settings(ws_tokens="alice=ta,bob=tb") if two else wf_settings()
    files = {}
    for who in ("alice", "bob"):
        files[who] = tmp_path / f"{who}.py"
        files[who].write_text(f"SECRET_OF_{who.upper()} = 1\n")
    async with running_daemon(settings) as daemon:
        clients = {
            "alice": await client_factory(daemon, "ta" if two else None),
            "bob": await client_factory(daemon, "tb" if two else None),
        }
        cids: dict[str, str] = {}

        async def run_step(who: str, number: int) -> None:
            issue = {"severity": "medium", "description": f"ISSUE-OF-{who.upper()}-{number}"}
            args = step(number, 3, final=number == 3, cid=cids.get(who),
                        findings=f"FINDING-OF-{who.upper()}-{number}", issues_found=[issue],
                        relevant_files=[str(files[who])])  # fmt: skip
            result = payload(await clients[who].call("codereview", args))
            cids.setdefault(who, result["continuation_id"])
            await asyncio.sleep(0)

        for number in (1, 2, 3):
            await asyncio.gather(run_step("alice", number), run_step("bob", number))
    assert cids["alice"] != cids["bob"]
    assert len(emulator.requests) == 2
    by_owner = {}
    for request in emulator.requests:
        text = sent_text(request)
        who = "alice" if "FINDING-OF-ALICE" in text else "bob"
        by_owner[who] = text
    for who, other in (("alice", "BOB"), ("bob", "ALICE")):
        text = by_owner[who]
        assert all(f"FINDING-OF-{who.upper()}-{n}" in text for n in (1, 2, 3))
        assert all(f"ISSUE-OF-{who.upper()}-{n}" in text for n in (1, 2, 3))
        assert f"SECRET_OF_{who.upper()}" in text
        assert other not in text


@pytest.mark.parametrize(
    ("arguments", "code", "words"),
    [
        ({"step_number": 3}, ErrorCode.VALIDATION_ERROR, "expects step_number 2"),
        ({"step_number": 1, "total_steps": 0}, ErrorCode.VALIDATION_ERROR, "total_steps"),
        ({"step_number": 4, "total_steps": 3}, ErrorCode.VALIDATION_ERROR, "beyond total_steps"),
        ({"continuation_id": None}, ErrorCode.VALIDATION_ERROR, "needs the continuation_id"),
        ({"continuation_id": str(uuid.uuid4())}, ErrorCode.CONVERSATION_NOT_FOUND, ""),
        ({"continuation_id": "not-a-thread"}, ErrorCode.CONVERSATION_NOT_FOUND, ""),
        ({"unknown_field": 1}, ErrorCode.VALIDATION_ERROR, "unknown_field"),
        ({"confidence": "sure"}, ErrorCode.VALIDATION_ERROR, "confidence"),
        (
            {"issues_found": [{"severity": "urgent", "description": "x"}]},
            ErrorCode.VALIDATION_ERROR,
            "severity",
        ),
    ],
)
async def test_bad_steps_are_refused_without_a_model_call(
    arguments, code, words, wf_settings, emulator, client_factory
):
    async with running_daemon(wf_settings()) as daemon:
        client = await client_factory(daemon)
        cid = payload(await client.call("codereview", step(1, 3)))["continuation_id"]
        args = {**step(2, 3, cid=cid, final=True), **arguments}
        args = {k: v for k, v in args.items() if v is not None}
        result = await client.call("codereview", args)
        assert result.error is not None and result.error.code == code, result.error
        assert words in result.error.message
        # The workflow is untouched: step 2 is still the one expected.
        assert payload(await client.call("codereview", step(2, 3, cid=cid)))["step_number"] == 2
    assert emulator.requests == []


async def test_a_step_cannot_be_sent_twice_or_after_completion(wf_settings, emulator,
                                                               client_factory):  # fmt: skip
    async with running_daemon(wf_settings()) as daemon:
        client = await client_factory(daemon)
        cid = payload(await client.call("debug", step(1, 2, tool="debug")))["continuation_id"]
        again = await client.call("debug", step(1, 2, tool="debug", cid=cid))
        assert again.error is None  # step 1 starts the workflow over on the same thread
        done = await client.call("debug", step(2, 2, tool="debug", cid=cid, final=True,
                                               confidence="certain"))  # fmt: skip
        assert payload(done)["status"] == "complete"
        late = await client.call("debug", step(2, 2, tool="debug", cid=cid))
        assert late.error.code == ErrorCode.VALIDATION_ERROR
        assert "already complete" in late.error.message
    assert emulator.requests == []


async def test_another_principals_workflow_is_not_found(wf_settings, emulator, client_factory):
    async with running_daemon(wf_settings(ws_tokens="alice=ta,bob=tb")) as daemon:
        alice = await client_factory(daemon, "ta")
        bob = await client_factory(daemon, "tb")
        cid = payload(await alice.call("analyze", step(1, 2, tool="analyze")))["continuation_id"]
        stolen = await bob.call("analyze", step(2, 2, tool="analyze", cid=cid, final=True))
        assert stolen.error.code == ErrorCode.CONVERSATION_NOT_FOUND
    assert emulator.requests == []


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"confidence": "certain"}, "confidence is certain"),
        ({"use_assistant_model": False}, "use_assistant_model is false"),
    ],
)
async def test_final_step_completes_locally_when_no_expert_is_wanted(
    fields, reason, wf_settings, emulator, source, client_factory
):
    async with running_daemon(wf_settings()) as daemon:
        client = await client_factory(daemon)
        cid = payload(await client.call("codereview", step(1, 2, relevant_files=[str(source)])))[
            "continuation_id"
        ]
        final = await client.call("codereview", step(2, 2, cid=cid, final=True, **fields))
        result = payload(final)
    assert emulator.requests == []
    assert result["status"] == "complete" and result["expert_analysis"] is None
    assert reason in result["expert_skipped"]
    assert final.metadata.workflow == {"status": "complete", "step_number": 2, "total_steps": 2}


async def test_a_retried_request_is_answered_from_the_stored_state(wf_settings, emulator,
                                                                   client_factory):  # fmt: skip
    settings = wf_settings()
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        cid = payload(await client.call("thinkdeep", step(1, 2, tool="thinkdeep")))[
            "continuation_id"
        ]
        args = step(2, 2, tool="thinkdeep", cid=cid, final=True)
        first = payload(await client.call("thinkdeep", args, request_id="final-once"))
    async with running_daemon(settings) as daemon:  # a new session: no in-memory replay
        client = await client_factory(daemon)
        second = payload(await client.call("thinkdeep", args, request_id="final-once"))
    assert second == first
    assert len(emulator.requests) == 1


async def test_single_step_workflow_calls_the_expert_at_once(wf_settings, emulator, source,
                                                             client_factory):  # fmt: skip
    async with running_daemon(wf_settings()) as daemon:
        client = await client_factory(daemon)
        result = await client.call("analyze", step(1, 1, tool="analyze", final=True,
                                                   relevant_files=[str(source)]))  # fmt: skip
        cid = payload(result)["continuation_id"]
        stored = await daemon.services.store.messages(cid, "anonymous")
    assert len(emulator.requests) == 1
    assert [m.role for m in stored] == ["user", "assistant"]


async def test_total_steps_grows_when_more_steps_are_needed(wf_settings, client_factory):
    async with running_daemon(wf_settings()) as daemon:
        client = await client_factory(daemon)
        first = payload(await client.call("planner", step(1, 1, tool="planner")))
        assert first["total_steps"] == 2 and first["next"]["step_number"] == 2


class _TwoCalls(Tool):
    """A tool that asks the model twice, to show the per-request ceiling."""

    class Input(ToolInput):
        pass

    name = "two_calls"
    description = "test"

    async def run(self, arguments: ToolInput, context: ToolContext) -> ToolResult:
        first = await run_turn(context, TurnRequest(prompt="one", store_turn=False))
        await run_turn(context, TurnRequest(prompt="two", store_turn=False))
        return ToolResult(first.text)


async def test_provider_calls_per_request_are_capped(wf_settings, emulator, client_factory):
    settings = wf_settings(max_provider_calls_per_request=1)
    async with running_daemon(settings, extra_tools=[_TwoCalls()]) as daemon:
        client = await client_factory(daemon)
        capped = await client.call("two_calls", {})
        assert capped.error.code == ErrorCode.OVER_CAPACITY and not capped.error.retryable
        assert "EXAI_MAX_PROVIDER_CALLS_PER_REQUEST" in capped.error.message
        assert len(emulator.requests) == 1
        # A workflow's final step needs exactly one call, so the same ceiling allows it.
        done = payload(await client.call("codereview", step(1, 1, final=True)))
        assert done["expert_analysis"]
    assert len(emulator.requests) == 2
