"""Workflows that produce artefacts for existing code: ``testgen`` and ``docgen``."""

from __future__ import annotations

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from exai.tools.workflow.engine import WorkflowTool
from exai.tools.workflow.inputs import WorkflowInput
from exai.tools.workflow.state import WorkflowState

__all__ = ["DocGenInput", "DocGenTool", "TestGenInput", "TestGenTool"]


class TestGenInput(WorkflowInput):
    __test__ = False  # not a pytest test class, whatever its name

    test_framework: str | SkipJsonSchema[None] = Field(
        default=None, description="e.g. pytest; default: the project's."
    )


class TestGenTool(WorkflowTool):
    __test__ = False

    name = "testgen"
    description = (
        "Plan tests for the code you name step by step; the final step gets a test suite "
        "written by a Kimi or GLM expert."
    )
    Input = TestGenInput
    profile = "full"
    expert_role = (
        "You are an expert in software testing. Write tests that would catch real bugs: "
        "edge cases, failure paths and invariants, not only the happy path. Follow the "
        "project's conventions and cite the code under test as path:line."
    )
    checklist = (
        "Find the code under test, its public behaviour and existing tests.",
        "List edge cases: empty, boundary, invalid and huge inputs.",
        "List failure paths: errors raised, timeouts, partial failures.",
        "Note what must be faked or isolated (I/O, time, randomness).",
    )
    conclusion = "Add the tests, run them, and report which fail and why."

    def expert_task(self, state: WorkflowState) -> str:
        framework = state.options.get("test_framework") or "the project's test framework"
        return (
            f"Write tests with {framework} for the relevant code, covering the cases the agent "
            "listed and any it missed. Give complete, runnable test code and one line per test "
            "on what it proves."
        )


class DocGenInput(WorkflowInput):
    doc_style: str | SkipJsonSchema[None] = Field(
        default=None, description="e.g. google, numpy, jsdoc; default: the project's."
    )


class DocGenTool(WorkflowTool):
    name = "docgen"
    description = (
        "Document the code you name step by step (purpose, parameters, errors, complexity); "
        "the final step gets a draft written by a Kimi or GLM expert."
    )
    Input = DocGenInput
    profile = "full"
    expert_role = (
        "You are a technical writer who reads code closely. Document what the code does and "
        "why, its parameters, return values, errors and complexity where it matters; never "
        "describe behaviour the code does not have."
    )
    checklist = (
        "List the public modules, classes and functions and their current docs.",
        "For each, note purpose, parameters, return values and errors raised.",
        "Note non-obvious behaviour: complexity, side effects, concurrency.",
    )
    conclusion = "Apply the documentation without changing code behaviour."

    def expert_task(self, state: WorkflowState) -> str:
        style = state.options.get("doc_style") or "the project's existing style"
        return (
            f"Write documentation in {style} for the relevant code, item by item with "
            "path:line, correcting any existing docs that are wrong."
        )
