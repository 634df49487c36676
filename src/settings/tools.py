"""Which tools are offered, which files they may read, how large their results may be."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from exai.settings.fields import CommaList, group, list_field

__all__ = ["ToolsSettings"]

_tools = group("tools")


class ToolsSettings(BaseModel):
    tool_profile: Literal["lean", "standard", "full"] = _tools(
        "standard", "Which tools are offered; see docs/toolsets.md."
    )
    tools_allow: CommaList = list_field(
        "tools", "Tools offered whatever the profile, comma-separated."
    )
    tools_deny: CommaList = list_field("tools", "Tools never offered, comma-separated.")
    allowed_roots: CommaList = Field(
        default_factory=lambda: [str(Path.home())],
        description="Absolute directories whose files tools may read, comma-separated. "
        "Default: your home directory, and on a loopback daemon the calling IDE's project "
        "roots too. When set, a ceiling that the IDE's roots can only narrow.",
        json_schema_extra={"group": "tools"},
    )
    max_result_tokens: int = _tools(
        20000, "Larger results are stored as artifacts and returned in pages.", ge=1000
    )
    max_provider_calls_per_request: int = _tools(8, "Model calls one tool call may make.", ge=1)
    max_upload_bytes: int = _tools(
        20_000_000,
        "Largest document (PDF, Office) or image sent to a model that can read it; a larger "
        "one is skipped with the reason. The vendor's own limit applies too.",
        ge=1,
    )

    @field_validator("allowed_roots")
    @classmethod
    def _roots_absolute(cls, value: list[str]) -> list[str]:
        for root in value:
            if not os.path.isabs(os.path.expanduser(root)):
                raise ValueError(f"{root!r} is not an absolute path")
        return [os.path.expanduser(root) for root in value]
