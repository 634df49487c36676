"""The arguments every workflow step takes, defined once and subclassed per tool.

An agent drives a workflow one step at a time: it investigates on its own, then
reports what it found in the fields below. Each tool adds only its own options.
Every tool's ``inputSchema`` is generated from these models and goes out with
every ``list_tools``, so descriptions stay terse and say only what the name does not.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from exai.tools.base import ToolInput

__all__ = [
    "CONFIDENCE_LEVELS",
    "SEVERITY_ORDER",
    "Confidence",
    "Issue",
    "Severity",
    "WorkflowInput",
    "terse_schema",
]

Confidence = Literal["exploring", "low", "medium", "high", "very_high", "almost_certain", "certain"]
CONFIDENCE_LEVELS: tuple[str, ...] = Confidence.__args__  # type: ignore[attr-defined]
Severity = Literal["critical", "high", "medium", "low"]
SEVERITY_ORDER: dict[str, int] = {"critical": 0, "high": 1, "medium": 2, "low": 3}


def terse_schema(schema: dict[str, Any]) -> None:
    """Drop ``"default": null``: an optional field that is absent says the same.

    (Titles are dropped for every tool by :meth:`exai.tools.base.Tool.input_schema`.)
    """
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]


class Issue(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=terse_schema)

    severity: Severity
    description: str = Field(min_length=1)
    location: str | SkipJsonSchema[None] = Field(default=None, description="path:line")

    def key(self) -> tuple[str, str, str]:
        return (self.severity, self.description.strip(), (self.location or "").strip())


class WorkflowInput(ToolInput):
    model_config = ConfigDict(extra="forbid", json_schema_extra=terse_schema)

    step: str = Field(min_length=1, description="This step's plan; step 1 states the task.")
    step_number: int = Field(ge=1)
    total_steps: int = Field(ge=1, description="Estimate; may change.")
    next_step_required: bool = Field(description="false on the final step.")
    findings: str = Field(description="What this step found.")
    files_checked: list[str] = Field(default_factory=list, description="Absolute paths examined.")
    relevant_files: list[str] = Field(
        default_factory=list, description="Absolute paths that matter; sent to the expert."
    )
    relevant_context: list[str] = Field(default_factory=list, description="Key symbols.")
    issues_found: list[Issue] = Field(default_factory=list)
    confidence: Confidence = "exploring"
    hypothesis: str | SkipJsonSchema[None] = None
    use_assistant_model: bool = Field(default=True, description="Expert model on final step.")
    continuation_id: str | SkipJsonSchema[None] = Field(
        default=None,
        description="The continuation_id step 1's result returned; required from step 2 on, "
        "so the steps form one workflow.",
    )
    model: str = Field(default="auto", description="Expert model, or auto.")

    @model_validator(mode="after")
    def _step_in_range(self) -> WorkflowInput:
        if self.step_number > self.total_steps:
            raise ValueError(
                f"step_number {self.step_number} is beyond total_steps {self.total_steps}; "
                "raise total_steps to continue"
            )
        if self.step_number > 1 and self.continuation_id is None:
            raise ValueError(
                f"step {self.step_number} needs the continuation_id that step 1 returned"
            )
        return self

    def paths(self) -> list[str]:
        """Every file path this step names, in order, each once."""
        return list(dict.fromkeys([*self.files_checked, *self.relevant_files]))

    def options(self) -> dict[str, Any]:
        """The tool's own options: every field the common model does not define."""
        own = set(type(self).model_fields) - set(WorkflowInput.model_fields)
        return self.model_dump(mode="json", include=own)
