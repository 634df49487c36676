"""Workflows that judge existing code: ``codereview``, ``secaudit`` and ``refactor``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from exai.tools.workflow.engine import WorkflowTool
from exai.tools.workflow.inputs import WorkflowInput
from exai.tools.workflow.state import WorkflowState

__all__ = [
    "CodeReviewInput",
    "CodeReviewTool",
    "RefactorInput",
    "RefactorTool",
    "SecAuditInput",
    "SecAuditTool",
]

_EXPERT = (
    "You are a principal engineer asked for a second opinion at the end of another "
    "engineer's investigation. Be specific: cite path:line, say why each point matters and "
    "give a concrete fix. Do not invent issues to seem thorough; say plainly what is sound."
)

_REVIEW_AREAS: dict[str, tuple[str, ...]] = {
    "full": (
        "Map the code: entry points, responsibilities, data flow.",
        "Correctness: logic errors, edge cases, error handling, concurrency.",
        "Security: input validation, authorization, secrets, injection.",
        "Performance: algorithmic cost, I/O in loops, blocking calls, memory.",
        "Maintainability: naming, duplication, complexity, dead code.",
        "Tests: untested paths and happy-path-only tests.",
    ),
    "security": (
        "Map trust boundaries: where untrusted input enters and where it ends up.",
        "Injection: SQL, shell, path traversal, template, deserialization.",
        "Authentication, authorization and session handling.",
        "Secrets, cryptography and sensitive data in logs or errors.",
    ),
    "performance": (
        "Find the hot paths and their complexity.",
        "I/O: queries in loops, missing batching, blocking calls on async paths.",
        "Memory: unbounded growth, copies, caches without limits.",
        "Concurrency: contention, serialization points, missing back-pressure.",
    ),
    "quick": (
        "Obvious bugs and broken error handling.",
        "Security red flags.",
        "Readability problems worth fixing now.",
    ),
}


class CodeReviewInput(WorkflowInput):
    review_type: Literal["full", "security", "performance", "quick"] = "full"
    severity_filter: Literal["critical", "high", "medium", "low"] = Field(
        default="low", description="Lowest severity reported."
    )


class CodeReviewTool(WorkflowTool):
    name = "codereview"
    description = (
        "Code review with Kimi or GLM as second reviewer: you investigate step by step and "
        "report issues; the final step gets the expert model's review. For a diff, a module "
        "or a pull request."
    )
    Input = CodeReviewInput
    expert_role = _EXPERT
    conclusion = (
        "Present the issues by severity with path:line and fixes; ask before changing code."
    )

    def areas(self, options: dict[str, Any]) -> tuple[str, ...]:
        return _REVIEW_AREAS[options.get("review_type", "full")]

    def min_severity(self, state: WorkflowState) -> str | None:
        return str(state.options.get("severity_filter", "low"))

    def expert_task(self, state: WorkflowState) -> str:
        kind = state.options.get("review_type", "full")
        minimum = self.min_severity(state)
        only = f" Report only issues of severity {minimum} or above." if minimum != "low" else ""
        return (
            f"Do a {kind} code review of the relevant files. Confirm or refute each issue the "
            "agent reported, add what it missed, and list issues by severity (critical, high, "
            f"medium, low) with path:line and a fix.{only} End with the top three fixes in order."
        )


_AUDIT_AREAS: dict[str, tuple[str, ...]] = {
    "owasp": (
        "Broken access control and authentication failures.",
        "Injection and unsafe deserialization.",
        "Cryptographic failures and sensitive data exposure.",
        "Security misconfiguration, SSRF, logging and monitoring gaps.",
    ),
    "compliance": (
        "Where personal or regulated data is collected, stored and sent.",
        "Retention, deletion and consent handling.",
        "Audit trails and access records.",
    ),
    "infrastructure": (
        "Network exposure: listeners, CORS, TLS.",
        "Secrets in configuration, images and CI.",
        "Privileges of processes, containers and service accounts.",
    ),
    "dependencies": (
        "Inventory dependencies and their pinned versions.",
        "Known-vulnerable or unmaintained packages.",
        "Supply chain: install scripts, unpinned sources, lock files.",
    ),
    "comprehensive": (
        "Map assets, trust boundaries and attack surface.",
        "Authentication, authorization and session handling.",
        "Input validation and injection of every kind.",
        "Secrets, cryptography and sensitive data handling.",
        "Dependencies and configuration.",
    ),
}


class SecAuditInput(WorkflowInput):
    audit_focus: Literal[
        "owasp", "compliance", "infrastructure", "dependencies", "comprehensive"
    ] = "comprehensive"
    threat_level: Literal["low", "medium", "high", "critical"] = Field(
        default="medium", description="How exposed the system is."
    )


class SecAuditTool(WorkflowTool):
    name = "secaudit"
    description = (
        "Security audit step by step (OWASP, secrets, auth, dependencies, infrastructure); "
        "the final step gets a Kimi or GLM expert's assessment."
    )
    Input = SecAuditInput
    profile = "full"
    expert_role = _EXPERT + " Your field is application security."
    conclusion = "Present vulnerabilities by severity with remediation; critical ones first."

    def areas(self, options: dict[str, Any]) -> tuple[str, ...]:
        return _AUDIT_AREAS[options.get("audit_focus", "comprehensive")]

    def expert_task(self, state: WorkflowState) -> str:
        focus = state.options.get("audit_focus", "comprehensive")
        threat = state.options.get("threat_level", "medium")
        return (
            f"Do a {focus} security audit for a system whose threat level is {threat}. For each "
            "vulnerability give severity, path:line, how it could be exploited and the fix; "
            "confirm or refute the agent's issues and add what it missed."
        )


_REFACTOR_AREAS: dict[str, tuple[str, ...]] = {
    "codesmells": (
        "Long functions, deep nesting, long parameter lists.",
        "Duplication and near-duplication.",
        "Unclear names, magic values, dead code.",
    ),
    "decompose": (
        "Modules, classes and functions holding more than one concept.",
        "Natural seams: what could be split out, and its interface.",
        "Callers affected by each split.",
    ),
    "modernize": (
        "Outdated language idioms and deprecated APIs.",
        "Standard-library or framework features that replace custom code.",
        "Typing and error-handling conventions.",
    ),
    "organization": (
        "Layout: do modules and packages match the concepts?",
        "Dependency direction and cycles.",
        "Public surface: what is exported and what should not be.",
    ),
}


class RefactorInput(WorkflowInput):
    refactor_type: Literal["codesmells", "decompose", "modernize", "organization"] = "codesmells"


class RefactorTool(WorkflowTool):
    name = "refactor"
    description = (
        "Find refactoring opportunities step by step (smells, decomposition, modernization, "
        "organization); the final step gets a Kimi or GLM expert's plan."
    )
    Input = RefactorInput
    profile = "full"
    expert_role = _EXPERT
    conclusion = "Present the refactorings in priority order; change code only when asked."

    def areas(self, options: dict[str, Any]) -> tuple[str, ...]:
        return _REFACTOR_AREAS[options.get("refactor_type", "codesmells")]

    def expert_task(self, state: WorkflowState) -> str:
        kind = state.options.get("refactor_type", "codesmells")
        return (
            f"Propose {kind} refactorings of the relevant files, highest value first. For each: "
            "path:line, what to change, why, the risk, and how to verify behaviour is kept."
        )
