"""What every vendor check is made of: the registry, the outcomes, and the raw
HTTP exchanges with a vendor.

A check is a small async function registered with :func:`check` for one or more
models; it receives a :class:`Probe` that sends requests to the vendor's own
endpoint with httpx (not through exai, so what it sees is the vendor), records
every exchange with its secrets masked, and returns an :class:`Outcome`:

- ``holds`` / ``does not hold``: the documented rule was tested and held or not;
- ``observed``: what the vendors' pages leave open (VENDORS.md marks it "?") was
  asked and the answer recorded, without a verdict;
- ``skipped``: the check could not run (no key for the vendor, or the model did
  not do what the check needed, e.g. call the tool), with why;
- ``error``: the request failed or the answer could not be read, with what.

Checks share a :class:`Run`: the settings, one HTTP client, the recorder,
results a later check reuses (:meth:`Probe.once`) and every ``finish_reason``
seen.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from exai.audit.scrub import Scrubber
from exai.providers.error_mapping import parse_error_body
from exai.redact import mask_url_credentials

__all__ = [
    "CHECKS",
    "Check",
    "Endpoint",
    "Exchange",
    "Outcome",
    "Probe",
    "Recorder",
    "Run",
    "Skip",
    "carries_reasoning",
    "check",
    "fails",
    "fixture_text",
    "holds",
    "observed",
    "scrub_json",
]

Vendor = Literal["kimi", "glm"]
Status = Literal["holds", "does not hold", "observed", "skipped", "error"]

# Response headers worth keeping in a recording: how to wait, and what to quote to support.
_KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-request-id",
                 "msh-request-id", "x-log-id")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Outcome:
    status: Status
    detail: str = ""


def holds(detail: str = "") -> Outcome:
    return Outcome("holds", detail)


def fails(detail: str) -> Outcome:
    return Outcome("does not hold", detail)


async def carries_reasoning(probe: Probe, body: dict[str, Any]) -> Outcome:
    """Whether the answer to ``body`` carries its reasoning in ``reasoning_content``."""
    answer = await probe.chat(body)
    if not answer.ok:
        return fails(answer.said())
    reasoning = answer.message.get("reasoning_content") or ""
    if reasoning:
        return holds(f"{len(reasoning)} characters of reasoning_content")
    return fails(f"no reasoning_content (finish_reason {answer.finish_reason()})")


def observed(detail: str) -> Outcome:
    return Outcome("observed", detail)


class Skip(Exception):
    """Raised by a check that cannot run: the message says why."""


@dataclass(frozen=True, slots=True)
class Check:
    name: str  # "kimi.tool_round"
    vendor: Vendor  # whose key it needs
    model: str
    rule: str  # the documented rule, in a sentence
    source: str  # where it is documented (VENDORS.md row and the vendor's page)
    run: Callable[[Probe], Awaitable[Outcome]]
    section: Literal["vendor", "exai"] = "vendor"


CHECKS: list[Check] = []


CheckFn = Callable[["Probe"], Awaitable[Outcome]]


def check(
    name: str,
    *,
    vendor: Vendor,
    models: Iterable[str],
    rule: str,
    source: str,
    section: Literal["vendor", "exai"] = "vendor",
) -> Callable[[CheckFn], CheckFn]:
    """Registers the decorated function as one check per model, in order."""

    def register(fn: CheckFn) -> CheckFn:
        for model in models:
            CHECKS.append(Check(name, vendor, model, rule, source, fn, section))
        return fn

    return register


@dataclass(slots=True)
class Exchange:
    """One request and the vendor's answer, as it came: a JSON body (or text), or
    the data of each SSE event of a stream (``[DONE]`` left out)."""

    url: str
    request: dict[str, Any]
    status: int
    headers: dict[str, str]
    body: Any = None
    chunks: list[Any] = field(default_factory=list)
    streamed: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def kind(self) -> str:
        if not self.ok:
            return "error"
        if self.streamed:
            return "stream"
        return "completion" if isinstance(self.body, dict) and "choices" in self.body else "other"

    def said(self) -> str:
        """``HTTP 400 invalid_request_error: ...``: the status and the vendor's words."""
        code, message = parse_error_body(self.body)
        text = f"HTTP {self.status}" + (f" {code}" if code else "")
        return text + (f": {message[:200]}" if message else "")

    def error_message(self) -> str:
        return parse_error_body(self.body)[1]

    @property
    def data(self) -> dict[str, Any]:
        """The body when it is a JSON object, else an empty one."""
        return self.body if isinstance(self.body, dict) else {}

    @property
    def choice(self) -> dict[str, Any]:
        first = (self.data.get("choices") or [{}])[0]
        return first if isinstance(first, dict) else {}

    @property
    def message(self) -> dict[str, Any]:
        return self.choice.get("message") or {}

    def json_chunks(self) -> list[dict[str, Any]]:
        return [c for c in self.chunks if isinstance(c, dict)]

    def finish_reason(self) -> str | None:
        if not self.streamed:
            return self.choice.get("finish_reason")
        reasons = [
            choice["finish_reason"]
            for chunk in self.json_chunks()
            for choice in chunk.get("choices") or []
            if choice.get("finish_reason")
        ]
        return reasons[-1] if reasons else None

    def streamed_text(self, name: str) -> str:
        """The ``content`` or ``reasoning_content`` of a stream, joined."""
        return "".join(
            str(choice.get("delta", {}).get(name) or "")
            for chunk in self.json_chunks() for choice in chunk.get("choices") or []
        )  # fmt: skip


def scrub_json(value: Any, scrub_text: Callable[[str], str]) -> Any:
    """``value`` with every string in it (keys included) passed through ``scrub_text``."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {scrub_text(str(k)): scrub_json(v, scrub_text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_json(v, scrub_text) for v in value]
    return value


class Recorder:
    """Writes each exchange as a JSON fixture under ``root/<vendor>/``, secrets
    masked, for tests/providers/test_vendor_fixtures.py to replay; or nothing."""

    def __init__(self, root: Path | None, scrub_text: Callable[[str], str]) -> None:
        self.root = root
        self._scrub = scrub_text
        self._counts: dict[tuple[str, str], int] = {}
        self._when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.written: list[Path] = []

    def write(self, check: Check, exchange: Exchange) -> None:
        if self.root is None:
            return
        key = (check.name, check.model)
        n = self._counts[key] = self._counts.get(key, 0) + 1
        folder = self.root / check.vendor
        stem = f"{check.name}--{check.model}"
        if n == 1:  # a new run of this check replaces what an earlier run wrote
            for old in folder.glob(f"{stem}--*.json"):
                old.unlink()
        url = mask_url_credentials(exchange.url)
        record = {
            "source": f"recorded by `make vendor-check` from {url} on {self._when}",
            "vendor": check.vendor,
            "check": check.name,
            "model": check.model,
            "rule": check.rule,
            "kind": exchange.kind,
            "request": {"method": "POST", "url": url, "body": exchange.request},
            "status": exchange.status,
            "headers": exchange.headers,
            "body": exchange.body,
            "chunks": exchange.chunks,
        }
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{stem}--{n}.json"
        path.write_text(fixture_text(scrub_json(record, self._scrub)), encoding="utf-8")
        self.written.append(path)


def fixture_text(record: dict[str, Any]) -> str:
    """A fixture as JSON that diffs well: one top-level field a line, and one line
    per chunk of a stream."""
    fields = []
    for key, value in record.items():
        if key == "chunks" and value:
            rows = ",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in value)
            fields.append(f' "chunks": [\n{rows}\n ]')
        else:
            fields.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


@dataclass(slots=True)
class Endpoint:
    base_url: str
    api_key: str


class Run:
    """What the checks of one run share."""

    def __init__(
        self, *, settings: Any, endpoints: dict[Vendor, Endpoint], record_dir: Path | None = None,
        timeout_s: float = 180.0,
    ) -> None:  # fmt: skip
        self.settings = settings
        self.endpoints = endpoints
        self.scrubber = Scrubber(e.api_key for e in endpoints.values())
        self.recorder = Recorder(record_dir, self.scrub)
        self.finish_reasons: dict[Vendor, list[tuple[str, str]]] = {"kimi": [], "glm": []}
        self._memo: dict[Any, Any] = {}
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=15.0))

    def scrub(self, text: str) -> str:
        return self.scrubber.scrub_text(text)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def post(
        self, check: Check, path: str, body: dict[str, Any], *, stream: bool = False
    ) -> Exchange:
        endpoint = self.endpoints[check.vendor]
        url = endpoint.base_url.rstrip("/") + path
        headers = {"Authorization": f"Bearer {endpoint.api_key}"}
        if stream:
            async with self._client.stream("POST", url, json=body, headers=headers) as response:
                exchange = _exchange(url, body, response)
                if response.status_code < 400:
                    exchange.streamed = True
                    exchange.chunks = [c async for c in _sse_data(response)]
                else:
                    raw = await response.aread()
                    exchange.body = _json_or_text(raw.decode("utf-8", "replace"))
        else:
            response = await self._client.post(url, json=body, headers=headers)
            exchange = _exchange(url, body, response)
            exchange.body = _json_or_text(response.text)
        reason = exchange.finish_reason() if exchange.kind in ("completion", "stream") else None
        if reason:
            self.finish_reasons[check.vendor].append((check.model, reason))
        self.recorder.write(check, exchange)
        return exchange

    async def once(self, key: Any, make: Callable[[], Awaitable[Any]]) -> Any:
        """``await make()`` the first time ``key`` is asked for; its result after that."""
        if key not in self._memo:
            self._memo[key] = await make()
        return self._memo[key]


def _exchange(url: str, body: dict[str, Any], response: httpx.Response) -> Exchange:
    kept = {k.lower(): v for k, v in response.headers.items()
            if k.lower() in _KEPT_HEADERS or k.lower().startswith("x-ratelimit")}  # fmt: skip
    return Exchange(url=url, request=body, status=response.status_code, headers=kept)


async def _sse_data(response: httpx.Response) -> Any:
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield _json_or_text(data)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class Probe:
    """A check's view of the run: its model, and requests recorded under its name."""

    def __init__(self, run: Run, check: Check) -> None:
        self.run = run
        self.check = check
        self.model = check.model

    @property
    def settings(self) -> Any:
        return self.run.settings

    async def chat(self, body: dict[str, Any], *, stream: bool = False) -> Exchange:
        """POST ``/chat/completions`` with ``model`` set to this check's model."""
        body = {"model": self.model, **body}
        if stream:
            body["stream"] = True
        return await self.run.post(self.check, "/chat/completions", body, stream=stream)

    async def post(self, path: str, body: dict[str, Any]) -> Exchange:
        return await self.run.post(self.check, path, body)

    async def once(self, key: Any, make: Callable[[], Awaitable[Any]]) -> Any:
        return await self.run.once(key, make)
