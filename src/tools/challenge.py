"""``challenge``: make the agent re-examine a claim instead of agreeing with it.

Agents tend to accept a user's pushback ("are you sure? I think X") without
checking. This tool asks no model: it hands the statement back wrapped in
instructions to evaluate it critically and to say so when it is wrong.
"""

from __future__ import annotations

import json

from pydantic import Field

from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult

__all__ = ["TOOLS", "ChallengeInput", "ChallengeTool"]

INSTRUCTIONS = (
    "CRITICAL REASSESSMENT. Do not agree automatically. Evaluate the statement below on its "
    "merits: check it against the code, the facts and what was said earlier. If it is "
    "wrong, incomplete or misleading, say so plainly and explain why. If it holds up, say "
    "why. Agreeing only to be agreeable is a failure; so is disagreeing only to seem "
    "independent."
)


class ChallengeInput(ToolInput):
    prompt: str = Field(min_length=1, description="The statement to re-examine.")


class ChallengeTool(Tool):
    name = "challenge"
    description = (
        "Re-examine a statement critically instead of agreeing by reflex, e.g. when the "
        "user pushes back on an answer. No model call."
    )
    Input = ChallengeInput
    profile = "lean"

    async def run(self, arguments: ChallengeInput, context: ToolContext) -> ToolResult:
        statement = arguments.prompt
        response = {
            "status": "challenge_accepted",
            "original_statement": statement,
            "challenge_prompt": f'{INSTRUCTIONS}\n\nStatement:\n"""\n{statement}\n"""',
            "next": "Answer the challenge_prompt with your own assessment before anything else.",
        }
        return ToolResult(json.dumps(response, indent=2, ensure_ascii=False))


TOOLS: list[Tool] = [ChallengeTool()]
