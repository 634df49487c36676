"""``consensus``: several models, each arguing a stance, asked at once, then a synthesis.

Every model is asked in parallel with its own deadline, so the call takes about
as long as the slowest model rather than the sum of them. A model that fails or
runs out of time does not sink the others: its error is reported beside their
answers. One more model call then weighs the answers; that call goes through
:func:`~exai.tools.turn.run_turn` with storage on, so the question, every answer
and the synthesis become one turn of the conversation. When the synthesis
fails, the answers still come back with its error beside them, but nothing is
stored: the conversation only ever holds whole exchanges.

Each model call counts against ``EXAI_MAX_PROVIDER_CALLS_PER_REQUEST``; a list
of models that cannot fit under it (with the synthesis) is refused up front.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from exai import tracing
from exai.errors import (
    ExaiError,
    InternalError,
    ProviderError,
    TimeoutError_,
    ValidationError_,
)
from exai.files import acheck_paths
from exai.protocol import UUID_PATTERN
from exai.providers.access import canonical, forbidden, permits
from exai.providers.base import Usage
from exai.providers.pricing import Cost, Spend
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult
from exai.tools.chat import CONTINUE_CONVERSATION
from exai.tools.turn import TurnRequest, response_cost, run_turn

__all__ = ["TOOLS", "ConsensusInput", "ConsensusTool", "Opinion", "StanceModel", "stance_prompt"]

Stance = Literal["for", "against", "neutral"]

# The synthesis needs time too: without their own timeout_s, models share at
# most this part of the call's remaining time.
_MODEL_SHARE = 2 / 3

_BRIEF = (
    "You are one of several models giving an independent assessment of the proposal "
    "or question below; another model will weigh all the answers. Be concrete: name "
    "benefits, risks and costs, cite files as path:line, and end with a one-line verdict."
)
_STANCES: dict[str, str] = {
    "for": "Argue for it: make the strongest honest case and say how to make it work. "
    "Do not invent benefits; if it is plainly a bad idea, say so.",
    "against": "Argue against it: find the strongest honest objections, risks and better "
    "alternatives. Do not invent problems; if it is plainly sound, say so.",
    "neutral": "Weigh it impartially: what is good, what is risky, what you would decide.",
}
SYNTHESIS_PROMPT = (
    "You combine several models' assessments of one proposal into a decision. Say where "
    "they agree and disagree, which arguments hold up (check them against the files when "
    "given), and give a clear recommendation with next steps."
)


class StanceModel(ToolInput):
    model: str = Field(min_length=1, description='Model name or alias, or "auto".')
    stance: Stance = "neutral"
    stance_prompt: str | SkipJsonSchema[None] = Field(
        default=None, description="Replaces the stance's prompt."
    )
    timeout_s: Annotated[float, Field(gt=0)] | SkipJsonSchema[None] = Field(
        default=None, description="Seconds."
    )


class ConsensusInput(ToolInput):
    prompt: str = Field(min_length=1, description="The proposal or question.")
    models: list[StanceModel] = Field(min_length=2, description="Each (model, stance) once.")
    files: list[str] = Field(default_factory=list, description="Absolute file or folder paths.")
    continuation_id: Annotated[str, Field(pattern=UUID_PATTERN)] | SkipJsonSchema[None] = Field(
        default=None, description=CONTINUE_CONVERSATION
    )
    synthesis_model: str | SkipJsonSchema[None] = Field(
        default=None, description="Default: the first model that answered."
    )


@dataclass(slots=True)
class Opinion:
    """One model's answer to its stance, or the error that stopped it."""

    asked: StanceModel
    text: str | None = None
    model: str | None = None  # the model that answered (a fallback may stand in)
    provider: str | None = None
    error: ExaiError | None = None
    latency_ms: float = 0.0
    usage: Usage = field(default_factory=Usage)
    cost: Cost | None = None

    @property
    def label(self) -> str:
        return f"{self.model or self.asked.model} ({self.asked.stance})"

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.asked.model, "stance": self.asked.stance}
        out["ok"] = self.error is None
        out["latency_ms"] = round(self.latency_ms, 1)
        if self.error is None:
            out.update(answered_by=self.model, provider=self.provider, usage=self.usage.as_dict(),
                       cost=None if self.cost is None else self.cost.as_dict())  # fmt: skip
        else:
            out["error"] = _error(self.error)
        return out


def stance_prompt(asked: StanceModel) -> str:
    return f"{_BRIEF}\n\n{asked.stance_prompt or _STANCES[asked.stance]}"


class ConsensusTool(Tool):
    name = "consensus"
    description = (
        "Weigh a decision: ask several Kimi and GLM models the same question in parallel, "
        "each for, against or neutral, and get a synthesis of their answers."
    )
    Input = ConsensusInput
    profile = "standard"

    async def run(self, arguments: ConsensusInput, context: ToolContext) -> ToolResult:
        await _check(arguments, context)
        # Parallel answers would interleave in one stream; progress frames report
        # instead. One copy serves every model call, so all count against the limit.
        quiet = replace(context, stream_requested=False)
        opinions = await _ask_all(arguments, context, quiet)
        answered = [o for o in opinions if o.error is None]
        if not answered:
            raise _all_failed(opinions)
        model = arguments.synthesis_model or answered[0].model
        await context.progress(f"synthesizing with {model}", len(opinions), len(opinions) + 1)
        usage, spend = Usage(), Spend()
        for opinion in answered:
            usage.add(opinion.usage)
            spend.add(opinion.cost)
        metadata: dict[str, Any] = {"continuation_id": arguments.continuation_id}
        metadata["opinions"] = [o.describe() for o in opinions]
        try:
            with tracing.span("synthesis", attributes={"exai.opinions": len(answered)}):
                turn = await run_turn(quiet, _synthesis_request(arguments, opinions, model))
        except ExaiError as exc:
            metadata.update(usage.metadata(), synthesis={"model": model, "error": _error(exc)})
            metadata.update(spend.as_metadata())
            heading = f"failed: {exc.code.value}: {exc.message}"
            return ToolResult(_report(opinions, heading), metadata)
        response = turn.response
        usage.add(response.usage)
        spend.add(response_cost(context.services.providers, response))
        metadata.update(turn.metadata)
        metadata.update(usage.metadata())
        # Every model call summed, per currency (see Spend.as_metadata).
        metadata.update(spend.as_metadata())
        metadata["synthesis"] = {"model": response.model, "provider": response.provider}
        return ToolResult(_report(opinions, f"by {response.model}\n{turn.text}"), metadata)


async def _check(arguments: ConsensusInput, context: ToolContext) -> None:
    """Everything that would fail every model, refused before any model is called."""
    calls = len(arguments.models) + 1
    limit = context.settings.max_provider_calls_per_request
    if calls > limit:
        raise ValidationError_(
            f"consensus makes one call per model plus one synthesis: {calls} calls, over the "
            f"limit of {limit} per request (EXAI_MAX_PROVIDER_CALLS_PER_REQUEST)"
        )
    providers = context.services.providers
    if providers is None or context.services.store is None:
        raise InternalError("the daemon was started without providers or a conversation store")
    catalogue = providers.catalogue
    names = [m.model for m in arguments.models]
    if arguments.synthesis_model is not None:
        names.append(arguments.synthesis_model)
    unknown = sorted({n for n in names if n.lower() != "auto" and catalogue.get(n) is None})
    if unknown:
        raise ValidationError_(
            f"unknown model(s) {', '.join(unknown)}; known: {', '.join(catalogue.names())}"
        )
    allowed = context.allowed_models
    if allowed is not None:  # every model it would ask must be one the caller may use
        permitted = canonical(catalogue, allowed)
        for name in names:
            found = catalogue.get(name)
            if found is not None and not permits(permitted, found):
                raise forbidden(name, found, permitted)
    seen: set[tuple[str, str]] = set()
    for asked in arguments.models:
        info = catalogue.get(asked.model)
        key = (info.name if info is not None else asked.model.lower(), asked.stance)
        if key in seen:
            raise ValidationError_(
                f"duplicate stance: {asked.model} is asked for stance {asked.stance!r} twice; "
                "give each (model, stance) once",
                details={"model": asked.model, "stance": asked.stance},
            )
        seen.add(key)
    if arguments.files:
        await acheck_paths(arguments.files, context.roots)
    if arguments.continuation_id is not None:
        await context.services.store.get_thread(arguments.continuation_id, context.principal.name)


async def _ask_all(
    arguments: ConsensusInput, context: ToolContext, quiet: ToolContext
) -> list[Opinion]:
    total = len(arguments.models) + 1
    done = 0
    share = context.remaining() * _MODEL_SHARE

    async def ask(asked: StanceModel) -> Opinion:
        nonlocal done
        opinion = await _ask(quiet, arguments, asked, min(asked.timeout_s or share, share))
        done += 1
        outcome = "answered" if opinion.error is None else f"failed ({opinion.error.code.value})"
        await context.progress(f"{opinion.label} {outcome}", done, total)
        return opinion

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(ask(asked)) for asked in arguments.models]
    return [task.result() for task in tasks]


async def _ask(
    context: ToolContext, arguments: ConsensusInput, asked: StanceModel, timeout_s: float
) -> Opinion:
    started = time.monotonic()
    request = TurnRequest(
        prompt=arguments.prompt,
        system_prompt=stance_prompt(asked),
        model=asked.model,
        continuation_id=arguments.continuation_id,
        files=arguments.files,
        store_turn=False,
    )
    try:
        # One span per model's opinion, under the call's (see exai.tracing).
        with tracing.span(f"opinion {asked.model}", attributes={"exai.stance": asked.stance}):
            try:
                async with asyncio.timeout(timeout_s):
                    turn = await run_turn(context, request)
            except TimeoutError:
                raise TimeoutError_(f"{asked.model} did not answer within {timeout_s:g}s") from None
    except ExaiError as exc:
        return Opinion(asked, error=exc, latency_ms=_since(started))
    response = turn.response
    return Opinion(
        asked,
        text=turn.text,
        model=response.model,
        provider=response.provider,
        latency_ms=_since(started),
        usage=response.usage,
        cost=response_cost(context.services.providers, response),
    )


def _since(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _all_failed(opinions: list[Opinion]) -> ExaiError:
    failed = [(o.label, o.error) for o in opinions if o.error is not None]
    listed = "; ".join(f"{label}: {e.code.value}: {e.message}" for label, e in failed)
    return ProviderError(
        f"no model answered: {listed}",
        retryable=any(e.retryable for _, e in failed),
        details={"opinions": [o.describe() for o in opinions]},
    )


def _synthesis_request(
    arguments: ConsensusInput, opinions: list[Opinion], model: str | None
) -> TurnRequest:
    """The synthesis turn. It is the one stored, so its input holds the whole exchange."""
    parts = [f"Proposal or question:\n{arguments.prompt}", "Assessments:"]
    for number, opinion in enumerate(opinions, 1):
        parts.append(f"### {number}. {opinion.label}\n{_answer(opinion)}")
    return TurnRequest(
        prompt="\n\n".join(parts),
        system_prompt=SYNTHESIS_PROMPT,
        model=model,
        continuation_id=arguments.continuation_id,
        files=arguments.files,
        title=arguments.prompt.strip().splitlines()[0][:80],
    )


def _error(exc: ExaiError) -> dict[str, Any]:
    return exc.info().model_dump(mode="json", exclude_none=True)


def _answer(opinion: Opinion) -> str:
    if opinion.error is not None:
        return f"(no answer: {opinion.error.code.value}: {opinion.error.message})"
    return opinion.text or "(empty answer)"


def _report(opinions: list[Opinion], synthesis: str) -> str:
    answered = sum(1 for o in opinions if o.error is None)
    parts = [f"Consensus of {len(opinions)} models ({answered} answered)."]
    parts += [f"## {opinion.label}\n{_answer(opinion)}" for opinion in opinions]
    parts.append(f"## Synthesis {synthesis}")
    return "\n\n".join(parts)


TOOLS: list[Tool] = [ConsensusTool()]
