"""``completion``: one model answer to a message array the caller sends whole.

The stateless tool under the model faces (:mod:`exai.web.openai` and the faces
built on it): the caller keeps its own history and sends all of it, so nothing
is read from or written to the conversation store, and every message reaches the
provider. Choosing the model (``"auto"``, aliases), the per-provider limits,
fallback and the ``provider_request`` audit event are the provider registry's,
as for every tool; the call itself goes through the dispatcher like any other,
so scopes, rate limits, deadlines and the call's audit events apply.

The caller may offer its own function tools (``tools``, ``tool_choice``,
``parallel_tool_calls``) and sampling parameters (``stop``, ``top_p``, ``seed``,
``response_format``, ``max_tokens``, ``temperature``). An answer in which the
model calls those tools ends with ``finish_reason: "tool_calls"`` and the calls
in the metadata (``tool_calls``, OpenAI shape); the caller runs them and sends
the results back as ``role: "tool"`` messages. A thinking model's reasoning for
such a round is kept by exai and put back when the round comes back (see
:mod:`exai.providers.tool_reasoning`). What exai adapted to serve the request is
listed in the metadata's ``notes``; what it cannot serve is a VALIDATION_ERROR
naming the parameter.

Streaming: to a WebSocket client, the text as ``stream_chunk`` frames; to an
in-process face that asked for events (``ToolContext.event_cb``), every provider
delta (text, reasoning, tool-call pieces, usage) as it comes.

Around the caller's messages it may add (see :mod:`exai.tools.completion_context`)
this request's ``instructions``, a stored response's conversation
(``previous_response_id``: the Responses API's state, owner-checked), and the
principal's memories (``memory``); with ``store_as`` it keeps the new messages and
the answer as a stored response; with ``session`` (the model faces set it, see
:mod:`exai.store.sessions`) the request and its answer are kept, after the answer,
as the next turn of the agent session they continue. Nothing else is read or
written.

Unlisted: a model choosing tools has no use for a raw message array, and every
MCP client would pay for its schema in each ``tools/list``. The faces, and any
script, call it by name; a principal whose scopes leave it out cannot use the
stateless endpoint. Its answers are never stored as artifacts: its callers
take long answers whole.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from exai.errors import InternalError, ValidationError_
from exai.protocol import ModelAnswer, ResultNote
from exai.protocol import ToolCall as CalledTool
from exai.providers import ChatRequest, ChatResponse, ModelNeeds
from exai.providers.catalogue import ModelInfo
from exai.store.sessions import SessionTurn
from exai.store.tokens import estimator_for
from exai.tools.base import Tool, ToolContext, ToolInput, ToolResult
from exai.tools.completion_context import keep_response, stored_messages, with_memory
from exai.tools.turn import ReasoningEffort, ThinkingMode, ask_model, response_cost

__all__ = ["TOOLS", "CompletionInput", "CompletionTool", "Message", "SessionOrigin", "ToolSpec"]

_STRICT = ConfigDict(extra="forbid")
RESPONSE_ID = r"^resp_[A-Za-z0-9]{8,64}$"


class FunctionCall(BaseModel):
    model_config = _STRICT

    name: str
    arguments: str = Field(description="The arguments, as a JSON string.")


class ToolCall(BaseModel):
    """A call the model made, as the caller sends it back in an assistant message."""

    model_config = _STRICT

    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    """One message in the OpenAI chat format; other keys (``name``,
    ``reasoning_content``...) are kept and sent on unchanged."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = Field(default=None, validate_default=True)

    @field_validator("tool_call_id")
    @classmethod
    def _answers_a_call(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("role") == "tool":
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        return value


class FunctionSpec(BaseModel):
    model_config = _STRICT

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = Field(default=None, description="A JSON Schema.")
    strict: bool | None = None


class ToolSpec(BaseModel):
    """One of the caller's tools, OpenAI shape."""

    model_config = _STRICT

    type: Literal["function"]
    function: FunctionSpec


class NamedFunction(BaseModel):
    model_config = _STRICT

    name: str


class NamedToolChoice(BaseModel):
    model_config = _STRICT

    type: Literal["function"]
    function: NamedFunction


class ResponseFormat(BaseModel):
    model_config = _STRICT

    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None

    @field_validator("json_schema")
    @classmethod
    def _with_its_type(cls, value: dict[str, Any] | None, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("type") != "json_schema":
            raise ValueError('json_schema goes with type "json_schema" only')
        return value


class SessionOrigin(BaseModel):
    """Where a kept request came from: what its agent session's thread records."""

    model_config = _STRICT

    face: str = Field(pattern=r"^[a-z_]{1,32}$", description="The model face it came through.")
    client: str | None = Field(default=None, max_length=128, description="The client's name.")
    ref: str | None = Field(
        default=None, max_length=256, description="The client's own id for its session."
    )


class CompletionInput(ToolInput):
    messages: list[Message] = Field(min_length=1, description="The whole conversation, in order.")
    model: str = Field(default="auto", description='Model name or alias, or "auto".')
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, description="Longest reply, in tokens.")
    thinking_mode: ThinkingMode = Field(default="auto", description="Model reasoning on/off.")
    reasoning_effort: ReasoningEffort | None = Field(
        default=None,
        description="How hard the model reasons; sent as the nearest level the model takes, "
        "or as its thinking switch.",
    )
    stream: bool = Field(default=False, description="Stream the answer as it is written.")
    tools: list[ToolSpec] | None = Field(
        default=None, max_length=128, description="Functions the model may call."
    )
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stop: str | list[str] | None = Field(default=None, description="Stop sequence(s).")
    top_p: float | None = Field(default=None, ge=0, le=1)
    seed: int | None = None
    response_format: ResponseFormat | None = None
    instructions: str | None = Field(
        default=None, description="A system prompt for this request only: sent first, not kept."
    )
    memory: bool = Field(
        default=False,
        description="Bring the caller's memories relevant to its last message (a marked block "
        "before that message).",
    )
    previous_response_id: str | None = Field(
        default=None, pattern=RESPONSE_ID, description="Continue a response kept with store_as."
    )
    store_as: str | None = Field(
        default=None,
        pattern=RESPONSE_ID,
        description="Keep this request's messages and the answer as a response under this id.",
    )
    session: SessionOrigin | None = Field(
        default=None,
        description="Keep the messages and the answer as the next turn of the agent session "
        "they continue (a thread the caller can open), after answering.",
    )

    @field_validator("tools")
    @classmethod
    def _distinct_names(cls, value: list[ToolSpec] | None) -> list[ToolSpec] | None:
        names = [t.function.name for t in value or []]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"tool names must differ; given twice: {', '.join(doubled)}")
        return value

    @field_validator("tool_choice")
    @classmethod
    def _among_the_tools(cls, value: Any, info: ValidationInfo) -> Any:
        names = {t.function.name for t in info.data.get("tools") or []}
        if isinstance(value, NamedToolChoice) and value.function.name not in names:
            raise ValueError(f"names {value.function.name!r}, which is not among the tools")
        if value == "required" and not names:
            raise ValueError('"required" needs tools to call')
        return value

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> str | list[str] | None:
        stops = [value] if isinstance(value, str) else value or []
        if any(not s for s in stops):
            raise ValueError("a stop sequence cannot be empty")
        return value


class CompletionTool(Tool):
    name = "completion"
    description = (
        "One answer from a Kimi or GLM model to a whole message array (OpenAI chat format, "
        "the caller's function tools included); stateless unless it continues or keeps a "
        "stored response."
    )
    Input = CompletionInput
    profile = "lean"
    listed = False
    spill_results = False

    async def run(self, arguments: CompletionInput, context: ToolContext) -> ToolResult:
        providers = context.services.providers
        if providers is None:
            raise InternalError("the daemon was started without providers")
        if arguments.stream:  # the argument and the protocol's "stream" flag mean the same
            context.stream_requested = True
        new = [m.model_dump(exclude_unset=True) for m in arguments.messages]
        previous = arguments.previous_response_id
        earlier = await stored_messages(context, previous) if previous else []
        _check_tool_results(earlier, new)
        messages = [*earlier, *new]
        if arguments.instructions:
            messages = [{"role": "system", "content": arguments.instructions}, *messages]
        memory_ids: list[str] = []
        notes: list[dict[str, str]] = []
        if arguments.memory:
            # A kept session's prompts are queued for extraction with their thread, by
            # the keeper; only an unkept request's are queued here.
            messages, memory_ids, notes = await with_memory(
                context, messages, extract=arguments.session is None
            )
        # The caller's tool rounds get their reasoning back once, before any model is
        # fitted to the request; a round answered by another daemon (or before a
        # restart) is read from the store, nothing when memory holds every round. The
        # rounds are known by the whole request as it was sent (instructions, memory).
        messages = await providers.recall_tool_reasoning(context.principal.name, messages)
        tools = [t.model_dump(exclude_none=True) for t in arguments.tools or []]
        needs = ModelNeeds(
            thinking=arguments.thinking_mode == "on",
            min_context_tokens=estimator_for("generic").messages(messages, tools),
            tool=context.tool,
        )
        thinking = arguments.thinking_mode
        stop = arguments.stop

        def request_for(info: ModelInfo) -> ChatRequest:
            return ChatRequest(
                model=info.model_id,
                messages=messages,
                temperature=arguments.temperature,
                max_output_tokens=arguments.max_tokens,
                thinking=None if thinking == "auto" else thinking == "on",
                reasoning_effort=arguments.reasoning_effort,
                request_id=context.request_id,
                continue_cut=arguments.max_tokens is None,
                tools=tools,
                tool_choice=_dumped(arguments.tool_choice),
                parallel_tool_calls=arguments.parallel_tool_calls,
                stop=[stop] if isinstance(stop, str) else stop,
                top_p=arguments.top_p,
                seed=arguments.seed,
                response_format=_dumped(arguments.response_format),
                client_history=True,
                owner=context.principal.name,
            )

        # "auto" passes over models whose API cannot take the request's parameters
        # (a forced tool_choice, a seed...) rather than choosing one that refuses them.
        allowed = context.allowed_models
        info = providers.resolve(
            arguments.model, needs, serves=lambda m: providers.prepare(request_for(m), m),
            allowed=allowed,
        )  # fmt: skip
        request = request_for(info)
        response = await ask_model(context, request, info)
        if arguments.store_as:
            await keep_response(context, arguments.store_as, previous, new, _answer(response))
        if arguments.session is not None and context.services.sessions is not None:
            # The session keeps the conversation as the caller sent it, with the
            # reasoning of its tool rounds that exai put back.
            sent = _with_recalled_reasoning([*earlier, *new], messages)
            if arguments.instructions:
                sent = [{"role": "system", "content": arguments.instructions}, *sent]
            context.services.sessions.keep(SessionTurn(
                owner=context.principal.name, messages=sent, answer=_answer(response),
                request_id=context.request_id, session_id=context.session_id,
                face=arguments.session.face, client=arguments.session.client,
                ref=arguments.session.ref, model=response.model, provider=response.provider,
                usage=response.usage.as_dict(), allowed_models=context.allowed_models,
            ))  # fmt: skip
        cost = response_cost(providers, response)
        answer = ModelAnswer(
            finish_reason=response.finish_reason or "stop",
            tool_calls=cast(list[CalledTool], response.tool_calls),
            notes=cast(list[ResultNote], [*notes, *response.notes]),
            memory_ids=memory_ids,
            fallback_from=response.fallback_from or None,
            reasoning=response.reasoning or None,
        )
        metadata: dict[str, Any] = {
            "model": response.model,
            "provider": response.provider,
            **response.usage.metadata(),
            "cost": None if cost is None else cost.as_dict(),
            **answer.fields(),
        }
        return ToolResult(response.text, metadata=metadata)


def _check_tool_results(earlier: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    """A tool result answering no earlier call is refused by the vendors (and by
    OpenAI); naming the caller's message beats a provider error after the fact. A
    stored response's calls (``previous_response_id``) count as earlier."""
    called: set[str] = set()
    for index, message in enumerate([*earlier, *new]):
        if message.get("role") == "assistant":
            called.update(str(c.get("id")) for c in message.get("tool_calls") or []
                          if isinstance(c, dict))  # fmt: skip
        elif message.get("role") == "tool" and message.get("tool_call_id") not in called:
            where = f"messages[{index - len(earlier)}]"
            raise ValidationError_(
                f"{where} is a tool result for tool_call_id {message.get('tool_call_id')!r}, "
                "which no earlier assistant message called",
                details={"param": where},
            )


def _with_recalled_reasoning(
    sent: list[dict[str, Any]], recalled: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The caller's messages, each tool round with the reasoning exai put back into the
    request (found by the round's call ids), where the caller did not bring it."""
    # A round with its reasoning put back is a new assistant dict; the rest of the
    # request is the caller's own dicts (and exai's system messages): nothing to do.
    sent_ids = {id(m) for m in sent}
    if all(id(m) in sent_ids or m.get("role") != "assistant" for m in recalled):
        return sent
    found = {
        tuple(str(c.get("id")) for c in m["tool_calls"]): m["reasoning_content"]
        for m in recalled
        if m.get("role") == "assistant" and m.get("tool_calls") and m.get("reasoning_content")
    }
    out = []
    for message in sent:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        key = tuple(str(c.get("id")) for c in calls or () if isinstance(c, dict))
        if key and key in found and not message.get("reasoning_content"):
            message = {**message, "reasoning_content": found[key]}
        out.append(message)
    return out


def _answer(response: ChatResponse) -> dict[str, Any]:
    """The model's answer as the message a stored conversation keeps."""
    message: dict[str, Any] = {"role": "assistant", "content": response.text}
    if response.tool_calls:
        message["tool_calls"] = response.tool_calls
    if response.reasoning:
        message["reasoning_content"] = response.reasoning
    return message


def _dumped(value: Any) -> Any:
    return value.model_dump(exclude_none=True) if isinstance(value, BaseModel) else value


TOOLS: list[Tool] = [CompletionTool()]
