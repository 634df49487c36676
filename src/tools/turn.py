"""One conversational model turn, shared by every tool that asks a model.

``run_turn`` is the path from a tool's arguments to a stored answer: check the
files, answer from the store if this very request already stored its turn, find
the thread (refusing another principal's), choose the model, build the full
message array in :func:`exai.store.history.assemble_messages` (the one place
history is assembled), call the provider through :func:`ask_model`, then store
the user's message and everything the model produced as one turn.

A turn is stored under its request's key, (principal, ``session_id``,
``request_id``), with the call's fingerprint (see :mod:`exai.store.base`). A
retry of the request, even after a restart that emptied the daemon's replay
cache, is answered with the stored turn (``replayed: true``) before any provider
is called, and a first turn retried finds the thread it started; the same key
sent for a different call is ``REQUEST_ID_REUSED``.

Documents and images among the files go to a model that can read them
(:mod:`exai.tools.attachments`): the extracted text and image parts become
messages of the turn, stored with it, so later turns replay them unchanged.

On a new thread's first turn the caller's memories relevant to the prompt
become a block added to the system prompt (see :mod:`exai.memory.block`); the
block is stored with the thread (its state, ``memory_block``) and replayed as
stored on every later turn, never rebuilt, so the prompt prefix stays the same
bytes for the thread's life. ``use_memory=False`` or ``EXAI_MEMORY_INJECT=false``
leave it out.

A thread may keep a system prompt of its own, given when it starts
(``keep_system_prompt``, from the OpenAI-compatible endpoint's system message):
tools that hold a conversation rather than play a role (``use_thread_prompt``)
use it on every later turn in place of their own.

:func:`ask_model` is the one way a tool calls a model: counted against the
request's provider-call limit, admitted by the principal's budget before
anything is sent (``BUDGET_EXCEEDED`` otherwise), streamed when the client asked
(:mod:`exai.tools.answer_stream`), whole otherwise, and charged: its usage and
cost join the call's ``charges``, and the result's ``cost`` is its price applied
to its usage (:func:`response_cost`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, cast

from exai import tracing
from exai.accounting.ledger import Charge
from exai.errors import ExaiError, InternalError, ValidationError_
from exai.files import acheck_paths
from exai.protocol import ModelAnswer, ReasoningEffort, ResultNote
from exai.providers import ChatRequest, ChatResponse, ModelInfo, ModelNeeds, Usage
from exai.providers.access import canonical, forbidden, permits
from exai.providers.pricing import Cost, call_cost
from exai.store.base import StoredMessage, Thread
from exai.store.history import AssembledMessages, ContextLimits, assemble_messages
from exai.store.tokens import estimator_for
from exai.tools.answer_stream import stream_answer
from exai.tools.attachments import FilesFound, attach, read_attachments
from exai.tools.base import ToolContext
from exai.tools.turn_store import (
    THREAD_PROMPT_KEY,
    answer_of,
    input_end,
    refuse_unusable,
    store_turn,
)

__all__ = [
    "ReasoningEffort",
    "ThinkingMode",
    "TurnRequest",
    "TurnResult",
    "ask_model",
    "response_cost",
    "run_turn",
]

ThinkingMode = Literal["auto", "on", "off"]

# The thread state entry holding a thread's frozen memory block and its memory ids.
_MEMORY_BLOCK_KEY = "memory_block"


@dataclass(slots=True)
class TurnRequest:
    prompt: str
    system_prompt: str | None = None
    model: str | None = None  # None or "auto": chosen from needs and routing rules
    continuation_id: str | None = None
    files: Sequence[str] = ()
    temperature: float | None = None
    thinking_mode: ThinkingMode = "auto"
    reasoning_effort: ReasoningEffort | None = None
    use_websearch: bool = False
    sensitive: bool = False
    store_turn: bool = True
    title: str | None = None
    keep_system_prompt: str | None = None  # a new thread's own, for its whole life
    use_thread_prompt: bool = False  # a thread's own system prompt replaces system_prompt
    use_memory: bool = True  # a new thread gets the caller's relevant memories


@dataclass(slots=True)
class TurnResult:
    """The answer. ``model`` and ``assembled`` are None when it came from the store
    (a retried request): then no model was chosen and no history assembled."""

    text: str
    response: ChatResponse
    model: ModelInfo | None
    continuation_id: str | None
    assembled: AssembledMessages | None
    metadata: dict[str, Any] = field(default_factory=dict)


async def run_turn(context: ToolContext, turn: TurnRequest) -> TurnResult:
    """One turn, under its own span when tracing is on (see :mod:`exai.tracing`)."""
    started = {"gen_ai.conversation.id": turn.continuation_id, "exai.files": len(turn.files)}
    with tracing.span("turn", attributes=started) as span:
        result = await _run_turn(context, turn, span)
        if span is not None:
            ended = {"gen_ai.conversation.id": result.continuation_id,
                     "exai.replayed": result.model is None}  # fmt: skip
            tracing.set_attributes(span, ended)
        return result


async def _run_turn(context: ToolContext, turn: TurnRequest, span: Any) -> TurnResult:
    services = context.services
    store, providers = services.store, services.providers
    if providers is None or store is None:
        raise InternalError("the daemon was started without providers or a conversation store")
    owner = context.principal.name
    roots = context.roots
    if turn.files:
        with tracing.span("check_files"):
            await acheck_paths(list(turn.files), roots)
    if turn.store_turn:
        done = await store.find_turn(owner, context.request_id, session_id=context.session_id,
                                     fingerprint=context.fingerprint)  # fmt: skip
        if done is not None:
            return _replayed(providers, *done)
    found = FilesFound()
    if turn.files:
        with tracing.span("read_files", attributes={"exai.files": len(turn.files)}):
            found = await read_attachments(list(turn.files), roots,
                                           context.settings.max_upload_bytes)  # fmt: skip
    thread_id = turn.continuation_id
    system_prompt = turn.system_prompt
    if thread_id is not None:
        await store.get_thread(thread_id, owner)  # CONVERSATION_NOT_FOUND before any model call
        if turn.keep_system_prompt is not None:
            raise ValidationError_(
                "a thread's system prompt is set when it starts; this one has its own"
            )
        if turn.use_thread_prompt:
            kept = await store.get_state(thread_id, THREAD_PROMPT_KEY)
            if kept is not None:
                system_prompt = kept["text"]
    elif turn.keep_system_prompt is not None:
        system_prompt = turn.keep_system_prompt
    memory = await _memory_block(context, turn, thread_id)

    needs = ModelNeeds(
        web_search=turn.use_websearch,
        thinking=turn.thinking_mode == "on",
        min_context_tokens=estimator_for("generic").text(turn.prompt),
        sensitive=turn.sensitive,
        tool=context.tool,
    )
    info = _resolve(providers, turn.model, needs, images=found.has_images,
                    allowed=context.allowed_models)  # fmt: skip
    if span is not None:
        span.update_name(f"turn {info.name}")
        span.set_attributes({"gen_ai.request.model": info.name, "exai.provider": info.provider})
    attachments = await attach(
        found, info, providers.providers.get(info.provider), store, owner,
        context.settings.max_upload_bytes,
    )  # fmt: skip
    new_input = attachments.new_input(turn.prompt)
    with tracing.span("assemble_history") as assembling:
        assembled = await assemble_messages(
            system_prompt=system_prompt,
            new_input=new_input,
            limits=ContextLimits(info.context_window, info.max_output_tokens, family=info.provider),
            store=store,
            thread_id=thread_id,
            owner=owner,
            files=found.text_paths,
            roots=roots,
            low_water=context.settings.history_low_water,
            memory_block=memory["text"] if memory else None,
        )
        tracing.set_attributes(assembling, {
            "exai.messages": len(assembled.messages),
            "exai.turns_dropped": assembled.turns_dropped,
            "exai.files_included": len(assembled.files_included),
        })  # fmt: skip
    request = ChatRequest(
        model=info.model_id,
        messages=assembled.messages,
        temperature=turn.temperature,
        thinking=None if turn.thinking_mode == "auto" else turn.thinking_mode == "on",
        reasoning_effort=turn.reasoning_effort,
        web_search=turn.use_websearch,
        request_id=context.request_id,
    )
    response = await ask_model(context, request, info)
    refuse_unusable(response)

    text = response.text
    if turn.store_turn:
        new_thread = thread_id is None
        with tracing.span("store_turn", attributes={"exai.new_thread": new_thread}):
            thread_id, text = await store_turn(context, turn, thread_id, response, new_input, found)
        if new_thread and memory:
            await store.put_state(thread_id, _MEMORY_BLOCK_KEY, memory)
            context.services.memory.injected(owner, thread_id, memory["ids"], memory["tokens"])
        if context.services.memory is not None:
            project = context.client_roots[0] if context.client_roots else None
            context.services.memory.queue_extraction(owner, turn.prompt, thread_id, project,
                                                     allowed=context.allowed_models)  # fmt: skip
    answer = ModelAnswer(
        notes=cast(list[ResultNote], response.notes),
        memory_ids=memory["ids"] if memory else [],
        fallback_from=response.fallback_from or None,
        reasoning=response.reasoning or None,
        turns_dropped=assembled.turns_dropped or None,
    )
    metadata: dict[str, Any] = {
        "model": response.model,
        "provider": response.provider,
        "continuation_id": thread_id,
        **response.usage.metadata(),
        "cost": _as_dict(response_cost(providers, response)),
        **answer.fields(),
    }
    if assembled.files_included:
        metadata["files_included"] = assembled.files_included
    if attachments.attached:
        metadata["files_attached"] = attachments.attached
    skipped = [*attachments.skipped, *assembled.files_skipped]
    if skipped:
        metadata["files_skipped"] = [{"path": p, "reason": r} for p, r in skipped]
    return TurnResult(text, response, info, thread_id, assembled, metadata)


def _resolve(
    providers: Any, model: str | None, needs: ModelNeeds, *, images: bool,
    allowed: frozenset[str] | None = None,
) -> ModelInfo:  # fmt: skip
    """The model for the call, among the ``allowed`` ones; with images among the
    files, one that reads them when the choice allows it (``auto``), else the model
    asked for, which then gets the images skipped with the reason."""
    if images:
        try:
            chosen: ModelInfo = providers.resolve(model, replace(needs, images=True),
                                                  allowed=allowed)  # fmt: skip
            return chosen
        except ExaiError:
            pass
    info: ModelInfo = providers.resolve(model, needs, allowed=allowed)
    return info


async def _memory_block(
    context: ToolContext, turn: TurnRequest, thread_id: str | None
) -> dict[str, Any] | None:
    """The thread's memory block: the one it stored, or for a new thread a new one.

    Only a thread that is stored gets one, since a block not kept could not be
    replayed. Memories narrowed to a project go only to calls from that project
    (the calling IDE's roots). Failing to build the block never fails the call:
    the thread then has none.
    """
    store, service = context.services.store, context.services.memory
    if thread_id is not None:
        kept: dict[str, Any] | None = await store.get_state(thread_id, _MEMORY_BLOCK_KEY)
        return kept
    if not (service is not None and turn.store_turn and turn.use_memory
            and context.settings.memory_inject):  # fmt: skip
        return None
    try:
        block = await service.block_for(
            context.principal.name, turn.prompt, estimator_for("generic").text,
            projects=list(context.client_roots),  # no roots: global memories only
        )  # fmt: skip
    except Exception as exc:
        context.log.warning("memory_injection_failed", error=str(exc))
        return None
    if block is None:
        return None
    return {"text": block.text, "ids": block.ids, "tokens": block.tokens}


async def ask_model(context: ToolContext, request: ChatRequest, info: ModelInfo) -> ChatResponse:
    """One model answer for a tool: counted, within budget, streamed if asked, charged."""
    services = context.services
    providers, ledger = services.providers, services.ledger
    allowed = context.allowed_models
    if allowed is not None:  # whatever chose the model: only the allowed ones are called
        permitted = canonical(providers.catalogue, allowed)
        if not permits(permitted, info):
            raise forbidden(info.name, info, permitted)
        request = replace(request, allowed_models=permitted)
    context.count_provider_call()
    reservation = None
    if ledger is not None:
        reservation = await ledger.admit(
            context.principal, lambda: _estimate(providers, request, info)
        )
        if reservation.key is not None:  # a budget's hold covers one reply, not its sequels
            request = replace(request, continue_cut=False)
    try:
        if context.stream_requested:
            response = await stream_answer(context, providers, request, info)
        else:
            response = await providers.complete(request, info)
    except BaseException:
        if reservation is not None:
            ledger.release(reservation)
        raise
    charge = Charge(response.model, response.provider, response.usage,
                    response_cost(providers, response))  # fmt: skip
    context.charges.append(charge)
    if reservation is not None:
        ledger.settle(context.principal.name, reservation, charge)
    return response


def response_cost(providers: Any, response: ChatResponse) -> Cost | None:
    """What the answer cost at the price of the model that gave it (None: no price)."""
    info = providers.catalogue.get(response.model) if response.model else None
    if info is None or info.price is None:
        return None
    return call_cost(info.price, response.usage)


def _estimate(providers: Any, request: ChatRequest, info: ModelInfo) -> Cost | None:
    """What a budget holds: the prompt as the vendor will get it (the reasoning exai puts
    back on a caller's tool rounds included), uncached, a reply as long as the output
    cap, and the fee of every web search the answer may make."""
    if info.price is None:
        return None
    sent = providers.outgoing(request, info)
    tokens = estimator_for(info.provider).messages(sent.messages, sent.tools)
    cap = min(request.max_output_tokens or info.max_output_tokens, info.max_output_tokens)
    # One search per round of the vendor's own tools, as many as the plugin allows.
    plugin = providers.providers.get(info.provider)
    searches = getattr(plugin, "max_tool_rounds", 1) if sent.web_search else 0
    return call_cost(info.price, Usage(prompt_tokens=tokens, completion_tokens=cap,
                                       web_searches=searches))  # fmt: skip


def _as_dict(cost: Cost | None) -> dict[str, Any] | None:
    return None if cost is None else cost.as_dict()


def _replayed(providers: Any, thread: Thread, stored: list[StoredMessage]) -> TurnResult:
    """The result of a turn this request already stored, as it was stored: its
    ``cost`` is what the stored usage cost, though nothing is spent again."""
    last = stored[-1]
    counts = last.usage or {}
    usage = Usage(**{f.name: int(counts.get(f.name) or 0) for f in fields(Usage)})
    response = ChatResponse(
        text=answer_of(stored, ""),
        model=last.model or "",
        provider=last.provider or "",
        usage=usage,
        messages=[m.provider_message() for m in stored[input_end(stored) :]],
    )
    metadata: dict[str, Any] = {
        "model": last.model,
        "provider": last.provider,
        "continuation_id": thread.id,
        **usage.metadata(),
        "cost": _as_dict(response_cost(providers, response)),
        "replayed": True,
    }
    return TurnResult(response.text, response, None, thread.id, None, metadata)
