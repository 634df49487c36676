"""Each workflow tool's own options and rules: planner branches and revisions,
debug's hypothesis, codereview's severity filter, guidance and schemas."""

from __future__ import annotations

import json

import pytest

from exai.protocol import ErrorCode
from exai.tools.workflow import TOOLS, WorkflowInput
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.tools.workflow_helpers import payload, sent_text, step, tool_extras


@pytest.fixture
def settings(tmp_path, emulator):
    return make_settings(tmp_path, **emulated_providers(emulator), tool_profile="full")


async def test_planner_records_revisions_and_branches(settings, emulator, client_factory):
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)

        async def plan(n, text, final=False, **fields):
            args = step(n, 5, tool="planner", final=final, cid=cid, step=text, **fields)
            return await client.call("planner", args)

        cid = None
        cid = payload(await plan(1, "Add a cache layer"))["continuation_id"]
        await plan(2, "Use an in-process dict")
        await plan(3, "Use Redis instead", is_step_revision=True, revises_step_number=2)
        await plan(4, "Alternative: precompute at build time", branch_from_step=1,
                   branch_id="precompute")  # fmt: skip
        unknown = await plan(5, "x", branch_id="nope")
        assert unknown.error.code == ErrorCode.VALIDATION_ERROR and "nope" in unknown.error.message
        backwards = await plan(5, "x", is_step_revision=True, revises_step_number=5)
        assert backwards.error.code == ErrorCode.VALIDATION_ERROR
        done = payload(await plan(5, "Measure both", final=True, branch_id="precompute"))
    plan_items = done["consolidated"]["plan"]
    assert plan_items[1]["superseded_by"] == 3
    assert plan_items[2]["revises_step_number"] == 2
    assert plan_items[4]["branch_id"] == "precompute"
    assert done["consolidated"]["branches"] == {"precompute": 1}
    sent = sent_text(emulator.requests[0])
    assert "2. Use an in-process dict [superseded by step 3]" in sent
    assert "4. Alternative: precompute at build time [branch precompute]" in sent


async def test_debug_requires_a_hypothesis_after_step_1(settings, emulator, client_factory):
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        cid = payload(await client.call("debug", step(1, 3, tool="debug")))["continuation_id"]
        args = step(2, 3, cid=cid)  # no hypothesis
        result = await client.call("debug", args)
        assert result.error.code == ErrorCode.VALIDATION_ERROR
        assert "hypothesis is required" in result.error.message
        ok = payload(await client.call("debug", step(2, 3, tool="debug", cid=cid)))
        assert ok["consolidated"]["hypothesis"] == "the cache is never invalidated"
    assert emulator.requests == []


async def test_codereview_severity_filter_leaves_minor_issues_out(settings, emulator,
                                                                  client_factory):  # fmt: skip
    issues = [
        {"severity": "low", "description": "NIT-NAMING"},
        {"severity": "critical", "description": "SQL-INJECTION", "location": "db.py:9"},
    ]
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        result = payload(await client.call("codereview", step(
            1, 1, final=True, issues_found=issues, severity_filter="high"
        )))  # fmt: skip
    assert result["consolidated"]["issues_found"] == [issues[1]]
    assert result["consolidated"]["issues_below_severity_filter"] == 1
    sent = sent_text(emulator.requests[0])
    assert "[critical] SQL-INJECTION (db.py:9)" in sent and "NIT-NAMING" not in sent
    assert "severity high or above" in sent


@pytest.mark.parametrize(
    ("tool", "options", "expected"),
    [
        ("codereview", {"review_type": "security"}, "trust boundaries"),
        ("codereview", {"review_type": "performance"}, "hot paths"),
        ("secaudit", {"audit_focus": "dependencies"}, "vulnerable"),
        ("refactor", {"refactor_type": "decompose"}, "seams"),
        ("analyze", {"analysis_type": "architecture"}, "coupling"),
        ("tracer", {"trace_mode": "dependencies"}, "depends on the target"),
        ("debug", {}, "symptom"),
        ("testgen", {}, "edge cases"),
        ("planner", {}, "scope"),
        ("precommit", {}, "hunks"),
    ],
)
async def test_guidance_follows_the_tool_and_its_options(tool, options, expected, settings,
                                                         tmp_path, client_factory):  # fmt: skip
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        args = step(1, 2, tool=tool, **options, **tool_extras(tool, tmp_path))
        result = payload(await client.call(tool, args))
    investigate = " ".join(result["next"]["investigate"]).lower()
    assert expected in investigate, investigate


async def test_the_checklist_is_spread_over_the_planned_steps(settings, source_file,
                                                              client_factory):  # fmt: skip
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        first = payload(await client.call("codereview", step(
            1, 4, relevant_files=[str(source_file)], confidence="high"
        )))  # fmt: skip
    todo = first["next"]["investigate"]
    assert todo[0].startswith("Map the code") and not any("Tests:" in t for t in todo)
    assert any(str(source_file) in t and "not yet checked" in t for t in todo)
    assert any("finish early" in t for t in todo)


@pytest.fixture
def source_file(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text("x = 1\n")
    return path


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_schemas_share_the_common_fields_and_stay_terse(tool):
    schema = tool.input_schema()
    assert set(WorkflowInput.model_fields) <= set(schema["properties"])
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) >= {"step", "step_number", "total_steps",
                                       "next_step_required", "findings"}  # fmt: skip
    text = json.dumps(schema)
    assert '"title"' not in text
    assert len(json.dumps({"name": tool.name, "description": tool.description,
                           "inputSchema": schema}, separators=(",", ":"))) < 2300  # fmt: skip
    assert len(tool.description) <= 200
