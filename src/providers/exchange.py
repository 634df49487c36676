"""One answer from a chat-completions provider, however many requests it takes.

An answer may need several provider requests: a built-in tool round trip
(Kimi's ``$web_search``: the model asks, we echo the arguments back, it answers)
and continuations when a reply stops at ``finish_reason="length"`` (unless the
caller capped the reply on purpose, ``ChatRequest.continue_cut``). A round in
which the model calls the caller's own tools (``ChatRequest.tools``) ends the
answer instead: the calls go back on the response with ``finish_reason=
"tool_calls"`` for the caller to run (streamed, each call is announced as soon as
its name is known and its arguments follow as they arrive). The loop that drives
those rounds is the same for every vendor and for streamed and whole replies, so
it is written once here. A plugin supplies the vendor edges: how to send one
request (:meth:`_send`, :meth:`_open_stream`), how to turn its SDK's exceptions
into :mod:`exai.errors` (:meth:`_map_error`), and, where the vendor differs,
which tools it answers itself and how, or how to ask for the rest of a cut reply.
"""

from __future__ import annotations

import time
import uuid
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, Protocol, TypeVar

from exai.errors import ContextTooLongError, ExaiError, ProviderError
from exai.providers.base import ChatRequest, ChatResponse, Delta, Provider, Usage
from exai.providers.reasoning import replay_messages
from exai.providers.retry import RetryPolicy
from exai.providers.wire import Round, StreamAssembler, round_from_completion

__all__ = ["CONTINUE_PROMPT", "ChatCompletionsProvider", "ChunkStream", "pool_shards"]

_CONNECTIONS_PER_CLIENT = 8


def pool_shards(max_inflight: int) -> tuple[int, int]:
    """How many SDK clients to use in turn, and how many connections each may hold.

    The HTTP pool underneath both SDKs scans every one of its connections for each
    request it places, so one pool serving dozens of concurrent requests spends
    more time on bookkeeping than on the requests. Small pools used in turn don't.
    """
    per_client = max(1, min(max_inflight, _CONNECTIONS_PER_CLIENT))
    return -(-max_inflight // per_client), per_client


T = TypeVar("T")

# Finish reasons that mean the vendor's content filter stopped the answer: OpenAI's and
# Moonshot's name, and Z.ai's ("sensitive", docs.z.ai/api-reference/api-code).
_REFUSALS = frozenset({"content_filter", "sensitive"})

CONTINUE_PROMPT = (
    "Your previous reply was cut off by the output limit. Continue exactly where it "
    "stopped, without repeating anything and without any preamble."
)


class ChunkStream(Protocol):
    """An open streamed reply: chunks one by one, and a way to stop early."""

    async def __anext__(self) -> Any: ...

    async def aclose(self) -> None: ...


class ChatCompletionsProvider(Provider):
    """The exchange loop shared by every provider that speaks chat completions."""

    label: str = "provider"  # how the vendor is named in messages to users
    max_tool_rounds: int = 3
    max_continuations: int = 3

    def __init__(self, *, retry: RetryPolicy) -> None:
        self.retry = retry

    # --- vendor edges -------------------------------------------------------

    @abstractmethod
    async def _send(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Any:
        """One non-streamed request; returns the SDK's completion object."""

    @abstractmethod
    async def _open_stream(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ChunkStream:
        """Start one streamed request; returns once the vendor has accepted it."""

    @abstractmethod
    def _map_error(self, exc: BaseException) -> ExaiError | None:
        """The :mod:`exai.errors` exception for an SDK exception, or None if foreign."""

    # Tools the plugin answers itself, by name: their calls never reach the caller.
    own_tools: frozenset[str] = frozenset()

    def _tools(self, request: ChatRequest) -> list[dict[str, Any]]:
        """Every tool the request offers the model: the vendor's built-in ones the
        plugin answers (web search) and the caller's."""
        return list(request.tools)

    def _tool_result(self, call: dict[str, Any]) -> dict[str, Any]:
        """The tool message answering a call to one of :attr:`own_tools`."""
        raise NotImplementedError

    def _continuation(
        self, messages: list[dict[str, Any]], partial: str, reasoning: str
    ) -> list[dict[str, Any]]:
        """Messages asking for the rest of a reply cut at ``partial``, whose reasoning
        so far was ``reasoning``."""
        return [
            *messages,
            {"role": "assistant", "content": partial},
            {"role": "user", "content": CONTINUE_PROMPT},
        ]

    # --- the Provider interface ---------------------------------------------

    async def complete(self, request: ChatRequest) -> ChatResponse:
        async for delta in self._exchange(request, streamed=False):
            if delta.response is not None:
                return delta.response
        raise AssertionError("the exchange ended without a response")  # pragma: no cover

    def stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        return self._exchange(request, streamed=True)

    # --- the loop -------------------------------------------------------------

    async def _exchange(
        self, request: ChatRequest, *, streamed: bool
    ) -> AsyncGenerator[Delta, None]:
        started = time.monotonic()
        tools = self._tools(request)
        # The prompt as this vendor accepts it, plus any tool round trips so far.
        rule = self.replay_rule(request)
        base = replay_messages(request.messages, rule, client=request.client_history)
        produced: list[dict[str, Any]] = []
        text: list[str] = []
        reasoning: list[str] = []
        answer_reasoning: list[str] = []  # since the last round of exai's own tools
        search: list[dict[str, Any]] = []
        usage = Usage()
        retries = tool_rounds = continuations = 0
        messages = base
        returned: list[dict[str, Any]] = []
        notes: list[dict[str, str]] = []
        while True:
            outcome: Round | None = None
            run_round = self._stream_round if streamed else self._whole_round
            async with aclosing(run_round(request, messages, tools)) as items:
                async for item in items:
                    if isinstance(item, Round):
                        outcome = item
                    else:
                        yield item
            assert outcome is not None
            retries += outcome.retries
            usage.add(outcome.usage)
            search.extend(outcome.search_results)
            if outcome.search_results:
                usage.web_searches += 1  # Z.ai bills each request that searched
            if outcome.reasoning:
                reasoning.append(outcome.reasoning)
                answer_reasoning.append(outcome.reasoning)
            own = [c for c in outcome.tool_calls if c["function"]["name"] in self.own_tools]
            theirs = [c for c in outcome.tool_calls if c["function"]["name"] not in self.own_tools]
            if theirs:
                returned = self._callers_calls(request, theirs, own, notes)
                produced.append(self._assistant_tool_turn(outcome, returned))
                text.append(outcome.text)
                break
            if own:
                usage.web_searches += len(own)  # Moonshot bills each $web_search call
                tool_rounds += 1
                if tool_rounds > self.max_tool_rounds:
                    raise ProviderError(
                        f"{self.label} was still calling tools after {self.max_tool_rounds} "
                        "rounds; giving up",
                        retryable=False,
                        details={"provider": self.name, "kind": "tool_rounds"},
                    )
                answer_reasoning = []
                step = [self._assistant_tool_turn(outcome, own)]
                step += [self._tool_result(call) for call in own]
                produced += step
                base = [*base, *step]
                messages = base
                continue
            text.append(outcome.text)
            cut = request.continue_cut and outcome.finish_reason == "length" and outcome.text
            if cut and continuations < self.max_continuations:
                continuations += 1
                messages = self._continuation(base, "".join(text), "".join(answer_reasoning))
                continue
            break
        answer = "".join(text)
        finish = outcome.finish_reason
        if finish in _REFUSALS:
            notes.append({"param": "answer", "message": (
                f"{self.label}'s content filter stopped the answer (finish_reason {finish!r})"
            )})  # fmt: skip
            finish = "content_filter"
        if returned:
            finish = "length" if finish == "length" else "tool_calls"
        else:
            final: dict[str, Any] = {"role": "assistant", "content": answer}
            if answer_reasoning:
                # Kept with the answer for the vendors that want every answer's reasoning
                # back (Preserved Thinking); the replay rule leaves it out for the rest.
                final["reasoning_content"] = "".join(answer_reasoning)
            produced.append(final)
            if not answer and finish != "content_filter":
                notes.append({"param": "answer", "message": (
                    f"{self.label} returned an empty answer (finish_reason {finish!r})"
                )})  # fmt: skip
        response = ChatResponse(
            text=answer,
            model=request.model,
            provider=self.name,
            reasoning="".join(reasoning) or None,
            finish_reason=finish,
            usage=usage,
            messages=produced,
            retries=retries,
            latency_ms=(time.monotonic() - started) * 1000.0,
            search_results=search,
            tool_calls=returned,
            notes=notes,
        )
        yield Delta("usage", usage=usage)
        yield Delta("done", finish_reason=finish, response=response)

    def _callers_calls(
        self,
        request: ChatRequest,
        calls: list[dict[str, Any]],
        own: list[dict[str, Any]],
        notes: list[dict[str, str]],
    ) -> list[dict[str, Any]]:
        """The calls to the caller's tools that end the answer, as the caller gets them."""
        if not request.tools:
            names = ", ".join(repr(c["function"]["name"]) for c in calls)
            raise ProviderError(
                f"{self.label} asked to call {names}, which exai did not offer", retryable=False
            )
        if own:
            notes.append(
                {
                    "param": "tools",
                    "message": (
                        f"the model called {len(own)} of exai's own tools (web search) in the same "
                        "round as yours; those calls were left out"
                    ),
                }
            )
        single = request.parallel_tool_calls is False and not self.params.parallel_tool_calls
        if single and len(calls) > 1:
            notes.append(
                {
                    "param": "parallel_tool_calls",
                    "message": (
                        f"{self.label} has no parallel_tool_calls parameter and the model called "
                        f"{len(calls)} tools at once; the first is returned, the rest were left out"
                    ),
                }
            )
            calls = calls[:1]
        out = []
        for call in calls:
            out.append(
                {
                    "id": call["id"] or f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": dict(call["function"]),
                }
            )
        return out

    @staticmethod
    def _assistant_tool_turn(outcome: Round, calls: list[dict[str, Any]]) -> dict[str, Any]:
        turn: dict[str, Any] = {"role": "assistant", "content": outcome.text, "tool_calls": calls}
        if outcome.reasoning:
            # Thinking models want their reasoning back alongside their own tool calls.
            turn["reasoning_content"] = outcome.reasoning
        return turn

    async def _whole_round(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncGenerator[Delta | Round, None]:
        async def attempt() -> Round:
            completion = await self._guarded(lambda: self._send(request, messages, tools))
            outcome = round_from_completion(completion)
            self._raise_for_finish(outcome.finish_reason, streamed=False)
            return outcome

        outcome, retries = await self.retry.run(attempt)
        outcome.retries = retries
        yield outcome

    async def _stream_round(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncGenerator[Delta | Round, None]:
        chunks, retries = await self.retry.run(
            lambda: self._guarded(lambda: self._open_stream(request, messages, tools))
        )
        single = request.parallel_tool_calls is False and not self.params.parallel_tool_calls
        assembler = StreamAssembler(
            own_tools=self.own_tools, max_client_calls=1 if single else None
        )
        try:
            while True:
                try:
                    chunk = await self._guarded(chunks.__anext__)
                except StopAsyncIteration:
                    break
                for delta in assembler.feed(chunk):
                    yield delta
        finally:
            await chunks.aclose()
        outcome = assembler.result()
        self._raise_for_finish(outcome.finish_reason, streamed=True)
        outcome.retries = retries
        yield outcome

    def _raise_for_finish(self, finish: str | None, *, streamed: bool) -> None:
        """A failure the vendor reports as a finish reason in a 200, as the error it is.

        Z.ai documents that a stream ending abnormally "will not return the error codes;
        the reason for the exception will be provided in the finish_reason"
        (docs.z.ai/api-reference/api-code), and reports a prompt over the window as
        ``model_context_window_exceeded``. A dropped connection is retried like any
        other when the reply was whole; a streamed one has already been shown in part,
        so it ends the call, retryable by the caller.
        """
        if finish == "model_context_window_exceeded":
            raise ContextTooLongError(
                f"the prompt does not fit the model's context window ({self.label} ended the "
                f"reply with finish_reason {finish!r})",
                details={"provider": self.name, "kind": "context_length", "finish_reason": finish},
            )
        if finish == "network_error":
            raise ProviderError(
                f"{self.label} lost its connection while answering (finish_reason {finish!r})",
                retryable=True,
                details={"provider": self.name, "kind": "stream" if streamed else "connection",
                         "finish_reason": finish},
            )  # fmt: skip

    async def _guarded(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await call()
        except (ExaiError, StopAsyncIteration):
            raise
        except Exception as exc:
            mapped = self._map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
