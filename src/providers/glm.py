"""GLM (Zhipu / Z.ai) through ``zai-sdk``.

The SDK is synchronous. Every call runs on a thread pool that belongs to this
provider and is as large as the GLM concurrency limit, so that the registry's
limiter, not the pool, decides how many calls run: never on the event loop
(one slow call would stall every session) and never on the loop's default
executor (shared with everything else and sized for other work). Streamed
chunks are read in the pool thread and handed to the loop with
``call_soon_threadsafe``, so the loop only ever awaits a queue. A synchronous
request cannot be interrupted: a cancelled call's thread finishes its HTTP
request (bounded by the provider timeout) before it is free again, and a
cancelled stream stops at its next chunk.

``ZhipuAiClient`` serves the mainland endpoint (open.bigmodel.cn) and
``ZaiClient`` the international one (api.z.ai); they share one API. GLM runs web
search on its side (the ``web_search`` tool) and returns the pages it read.
Its thinking interleaves with tool calls, so a thinking model gets its reasoning
back on its tool-call messages (see :mod:`exai.providers.reasoning`).

Of the caller's parameters (:attr:`GLMProvider.params`, from Z.ai's chat API
reference): ``tool_choice`` "auto" only (a "none" is served by sending no tools,
see :mod:`exai.providers.params`), one stop word, ``response_format`` text or
``json_object``; ``seed`` is a parameter of the SDK. A streamed request with
tools asks for ``tool_stream`` on the models that have it (the catalogue's
``tool_stream``), so a call's arguments arrive as they are written rather than
whole at the end. ``temperature`` and ``top_p`` go in the body as given: the SDK
would turn 1.0, which the API takes, into 0.99, and a temperature of 0 into 0.01
with sampling off. GLM-5.2 and later take ``reasoning_effort``; GLM-5.3 always
thinks. A failure Z.ai reports as a finish reason (``sensitive``,
``network_error``, ``model_context_window_exceeded``) is read as the failure it
is (see :mod:`exai.providers.exchange`).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx
from zai import ZaiClient, ZhipuAiClient
from zai.core._errors import (
    APIConnectionError,
    APIResponseError,
    APIStatusError,
    APITimeoutError,
)

from exai.errors import ExaiError
from exai.providers.base import ParamSupport
from exai.providers.error_mapping import (
    ErrorKind,
    VendorFailure,
    connection_error,
    status_error,
    stream_error,
)
from exai.providers.exchange import ChatCompletionsProvider, pool_shards
from exai.providers.params import vendor_fields
from exai.providers.reasoning import ReplayRule
from exai.providers.retry import RetryPolicy

if TYPE_CHECKING:
    from exai.providers.base import ChatRequest
    from exai.settings import Settings

__all__ = ["WEB_SEARCH_TOOL", "GLMProvider", "create"]

WEB_SEARCH_TOOL: dict[str, Any] = {
    "type": "web_search",
    "web_search": {"enable": True, "search_result": True},
}

_MAINLAND_HOST = "open.bigmodel.cn"


def _classify(failure: VendorFailure) -> ErrorKind | None:
    """Z.ai's business codes (docs.z.ai/api-reference/api-code)."""
    try:
        code = int(failure.code or "")
    except ValueError:
        return None
    if code == 1261:
        return "context_length"
    if 1000 <= code <= 1004:
        return "auth"
    if code == 1113 or (1304 <= code <= 1310 and code != 1305):
        return "balance"  # arrears, daily or plan quota spent: waiting will not help
    if 1110 <= code <= 1121:
        return "permission"
    if code in (1302, 1303, 1305):
        return "rate_limit"
    if code == 1211:
        return "not_found"
    if code == 1301:
        return "bad_request"
    return None


class GLMProvider(ChatCompletionsProvider):
    name = "glm"
    label = "GLM"
    setup_hint = "set GLM_API_KEY (or ZAI_API_KEY / ZHIPUAI_API_KEY) to a Z.ai or Zhipu API key"
    params = ParamSupport(
        tool_choice=frozenset({"auto"}),
        parallel_tool_calls=False,
        max_stop=1,
        response_formats=frozenset({"text", "json_object"}),
    )

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str = "https://api.z.ai/api/paas/v4",
        max_inflight: int = 64,
        timeout_s: float = 300.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(retry=retry or RetryPolicy())
        self.base_url = base_url.rstrip("/")
        self.max_inflight = max_inflight
        self.timeout_s = timeout_s
        self._clients: list[ZaiClient | ZhipuAiClient] = []
        self._pool: ThreadPoolExecutor | None = None
        if api_key:
            client_class = ZhipuAiClient if _MAINLAND_HOST in self.base_url else ZaiClient
            timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
            shards, per_client = pool_shards(max_inflight)
            self._clients = [
                client_class(
                    api_key=api_key,
                    base_url=self.base_url,
                    timeout=timeout,
                    max_retries=0,
                    http_client=httpx.Client(
                        timeout=timeout,
                        limits=httpx.Limits(
                            max_connections=per_client, max_keepalive_connections=per_client
                        ),
                    ),
                )
                for _ in range(shards)
            ]
            self._pool = ThreadPoolExecutor(max_workers=max_inflight, thread_name_prefix="exai-glm")
        self._next = itertools.cycle(self._clients)

    def configured(self) -> bool:
        return bool(self._clients)

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        for client in self._clients:
            client.close()

    # --- one request ------------------------------------------------------------

    def _kwargs(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": request.model, "messages": messages}
        extra: dict[str, Any] = {}
        if request.temperature is not None:
            # In the body, not through the SDK, which would send 1.0 as 0.99 and 0.0 as
            # 0.01 with sampling off: Z.ai takes [0, 1] as given.
            extra["temperature"] = request.temperature
        if request.max_output_tokens is not None:
            kwargs["max_tokens"] = request.max_output_tokens
        if request.thinking is not None:
            kwargs["thinking"] = {"type": "enabled" if request.thinking else "disabled"}
        if tools:
            kwargs["tools"] = tools
        fields = vendor_fields(request, self.params, tools_sent=bool(tools))
        top_p = fields.pop("top_p", None)
        if top_p is not None:
            extra["top_p"] = top_p
        if extra:
            kwargs["extra_body"] = extra
        kwargs.update(fields)
        return kwargs

    def _tools(self, request: ChatRequest) -> list[dict[str, Any]]:
        return [WEB_SEARCH_TOOL, *request.tools] if request.web_search else list(request.tools)

    def replay_rule(self, request: ChatRequest) -> ReplayRule:
        thinks = request.thinks if request.thinks is not None else request.thinking is True
        return ReplayRule(tool_reasoning=thinks)

    def _create(self, kwargs: dict[str, Any], stream: bool) -> Any:
        """Runs in a pool thread. The SDK rewrites message contents in place, so it
        gets its own copy, made here rather than on the event loop."""
        kwargs = {**kwargs, "messages": [_own_copy(m) for m in kwargs["messages"]]}
        return next(self._next).chat.completions.create(stream=stream, **kwargs)

    async def _send(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Any:
        loop = asyncio.get_running_loop()
        kwargs = self._kwargs(request, messages, tools)
        return await loop.run_in_executor(self._pool, self._create, kwargs, False)

    async def _open_stream(
        self, request: ChatRequest, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> _ThreadedStream:
        stream = _ThreadedStream(asyncio.get_running_loop())
        assert self._pool is not None
        kwargs = self._kwargs(request, messages, tools)
        if request.tools and request.tool_stream:
            kwargs["tool_stream"] = True
        self._pool.submit(stream.pump, self._create, kwargs)
        await stream.opened()
        return stream

    # --- errors -----------------------------------------------------------------

    def _map_error(self, exc: BaseException) -> ExaiError | None:
        if isinstance(exc, APIStatusError):
            return status_error(
                provider=self.name,
                label=self.label,
                status=exc.status_code,
                headers=exc.response.headers,
                body=exc.response.text,  # the SDK reads the body before raising
                classify=_classify,
                setup_hint=self.setup_hint,
            )
        if isinstance(exc, APIConnectionError):
            timed_out = isinstance(exc, APITimeoutError)
            return connection_error(
                provider=self.name,
                label=self.label,
                base_url=self.base_url,
                timeout_s=self.timeout_s if timed_out else None,
                cause=exc,
            )
        if isinstance(exc, APIResponseError):
            return stream_error(provider=self.name, label=self.label, body=exc.json_data)
        if isinstance(exc, httpx.TransportError):  # raised while reading a stream
            return connection_error(
                provider=self.name, label=self.label, base_url=self.base_url, timeout_s=None,
                cause=exc,
            )  # fmt: skip
        return None


class _ThreadedStream:
    """A streamed GLM reply read by a pool thread and consumed on the event loop.

    The thread posts ``(kind, payload)`` items with ``call_soon_threadsafe``;
    ``kind`` is "open" once the vendor accepted the request, then "chunk" per
    chunk and "end", or "error" with the exception. Closing early tells the
    thread to stop at the next chunk.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._stop = threading.Event()

    def _post(self, kind: str, payload: Any = None) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (kind, payload))
        except RuntimeError:  # the loop is gone; nobody is listening any more
            self._stop.set()

    def pump(self, create: Any, kwargs: dict[str, Any]) -> None:
        response = None
        try:
            response = create(kwargs, True)
            self._post("open")
            for chunk in response:
                if self._stop.is_set():
                    break
                self._post("chunk", chunk)
            self._post("end")
        except BaseException as exc:
            self._post("error", exc)
        finally:
            raw = getattr(response, "response", None)
            if raw is not None:
                raw.close()

    async def opened(self) -> None:
        try:
            kind, payload = await self._queue.get()
        except BaseException:  # cancelled while the vendor had not answered yet
            self._stop.set()
            raise
        if kind == "error":
            raise payload
        assert kind == "open", kind

    async def __anext__(self) -> Any:
        kind, payload = await self._queue.get()
        if kind == "chunk":
            return payload
        if kind == "error":
            raise payload
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._stop.set()


def create(settings: Settings) -> GLMProvider:
    key = settings.glm_api_key
    return GLMProvider(
        api_key=key.get_secret_value() if key else None,
        base_url=settings.glm_base_url,
        max_inflight=settings.glm_max_inflight,
        timeout_s=settings.provider_timeout_s,
        retry=RetryPolicy.from_settings(settings),
    )


def _own_copy(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``message`` the SDK may change: it reassigns ``content`` and, in a
    list of parts, rewrites image URLs inside them. A text message (all of a long
    history, usually) needs only a shallow copy: for 2,000 messages, 0.4 ms
    instead of 3.3 ms for a deep copy, on every call, holding the GIL."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return dict(message)
    return copy.deepcopy(message)
