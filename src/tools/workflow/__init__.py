"""Multi-step workflow tools and the one engine behind them.

An agent calls a workflow tool once per step: it investigates with its own
tools, then reports findings, files and issues. Intermediate steps answer at
once with the consolidated picture and what to look at next; the final step
asks an expert model once. Progress is kept with the conversation
(:mod:`exai.tools.workflow.state`), never on the tool objects, which every
session shares.
"""

from __future__ import annotations

from exai.tools.base import Tool
from exai.tools.workflow.engine import Evidence, WorkflowTool
from exai.tools.workflow.generate import DocGenTool, TestGenTool
from exai.tools.workflow.inputs import Issue, WorkflowInput
from exai.tools.workflow.investigate import AnalyzeTool, DebugTool, ThinkDeepTool, TracerTool
from exai.tools.workflow.planner import PlannerTool
from exai.tools.workflow.precommit import PrecommitTool
from exai.tools.workflow.review import CodeReviewTool, RefactorTool, SecAuditTool

__all__ = [
    "TOOLS",
    "AnalyzeTool",
    "CodeReviewTool",
    "DebugTool",
    "DocGenTool",
    "Evidence",
    "Issue",
    "PlannerTool",
    "PrecommitTool",
    "RefactorTool",
    "SecAuditTool",
    "TestGenTool",
    "ThinkDeepTool",
    "TracerTool",
    "WorkflowInput",
    "WorkflowTool",
]

TOOLS: list[Tool] = [
    ThinkDeepTool(),
    AnalyzeTool(),
    CodeReviewTool(),
    DebugTool(),
    PlannerTool(),
    PrecommitTool(),
    RefactorTool(),
    SecAuditTool(),
    TestGenTool(),
    TracerTool(),
    DocGenTool(),
]
