"""Provider storms: the emulator answers bursts of 429 and 503.

Two daemons with ``EXAI_PROVIDER_MAX_RETRIES=3`` call Kimi through the emulator;
one has ``EXAI_FALLBACK_MODELS=glm-4.6``. Requests are counted at the emulator:
a 429 or 503 is retried after the wait the vendor asked for (``Retry-After``) or
an exponential backoff of at least 0.5 s; a burst longer than the retries moves
to the fallback model when one is configured and otherwise ends in a clear
``RATE_LIMITED`` or ``PROVIDER_ERROR``; a 400 or 401 is never retried and never
falls back (the request or the key must change first).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exai.client import ExaiClient
from exai.emulators.provider import EmulatorServer
from exai.protocol import CallToolResult, ErrorCode
from tests.reliability.harness import DaemonProcess, provider_env, scaled

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(300)]

TOKEN = "provider-storm-token-31"
MODEL = "kimi-k2.6"
FALLBACK = "glm-4.6"
RETRIES = 3
MIN_BACKOFF_S = 0.5  # RetryPolicy.initial_backoff_s: the first wait after a 503


@pytest.fixture(scope="module")
def daemons(
    tmp_path_factory: pytest.TempPathFactory, provider_emulator: EmulatorServer
) -> Iterator[dict[str, DaemonProcess]]:
    env = {
        **provider_env(provider_emulator),
        "EXAI_PROVIDER_MAX_RETRIES": str(RETRIES),
        "EXAI_WS_TOKEN": TOKEN,
        "EXAI_RATE_LIMIT_PER_MIN": "0",
    }
    started = {
        "fallback": DaemonProcess(
            tmp_path_factory.mktemp("fallback"), EXAI_FALLBACK_MODELS=FALLBACK, **env
        ).start(),
        "plain": DaemonProcess(tmp_path_factory.mktemp("plain"), **env).start(),
    }
    yield started
    for daemon in started.values():
        daemon.stop()
        assert daemon.log_problems() == [], daemon.log_problems()[:5]


async def _chat(daemon: DaemonProcess, prompt: str, **extra: Any) -> CallToolResult:
    async with ExaiClient(daemon.url, TOKEN) as client:
        return await client.call("chat", {"prompt": prompt, "model": MODEL, **extra}, wait_s=120)


def _requests(emulator: EmulatorServer, vendor: str) -> list[dict[str, Any]]:
    return sorted(emulator.requests_for(vendor), key=lambda r: r["received_at"])  # type: ignore[arg-type]


def _gaps(requests: list[dict[str, Any]]) -> list[float]:
    """Seconds from each answer to the next request: the wait before each retry."""
    return [b["received_at"] - a["answered_at"] for a, b in itertools.pairwise(requests)]


def _count(figures: Any, retries: int = 0, fallbacks: int = 0) -> None:
    figures.add("provider", "scenarios")
    figures.add("provider", "retries_observed", retries)
    figures.add("provider", "fallbacks", fallbacks)


def _least(figures: Any, key: str, value: float) -> None:
    section = figures.sections.setdefault("provider", {})
    section[key] = round(min(section.get(key, value), value), 3)


async def test_429_burst_is_retried_after_the_wait_the_vendor_asked_for(
    daemons: dict[str, DaemonProcess], emulator: EmulatorServer, figures
) -> None:
    emulator.script(*[{"status": 429, "retry_after_ms": 300}] * 2, vendor="kimi")
    res = await _chat(daemons["plain"], "through a 429 burst")
    assert res.error is None, res.error
    kimi = _requests(emulator, "kimi")
    assert len(kimi) == 3
    assert all(gap >= 0.3 for gap in _gaps(kimi)), _gaps(kimi)
    _least(figures, "min_gap_after_retry_after_s", min(_gaps(kimi)))
    _count(figures, retries=2)


async def test_503_burst_is_retried_with_backoff(
    daemons: dict[str, DaemonProcess], emulator: EmulatorServer, figures
) -> None:
    emulator.script(*[{"status": 503}] * 2, vendor="kimi")
    res = await _chat(daemons["plain"], "through a 503 burst")
    assert res.error is None, res.error
    kimi = _requests(emulator, "kimi")
    assert len(kimi) == 3
    gaps = _gaps(kimi)
    assert all(gap >= MIN_BACKOFF_S for gap in gaps), gaps
    _least(figures, "min_backoff_s", min(gaps))
    _count(figures, retries=2)


async def test_503_before_the_first_chunk_of_a_stream_is_retried(
    daemons: dict[str, DaemonProcess], emulator: EmulatorServer, figures
) -> None:
    emulator.script({"status": 503}, vendor="kimi")
    chunks: list[str] = []
    async with ExaiClient(daemons["plain"].url, TOKEN) as client:
        res = await client.call(
            "chat",
            {"prompt": "stream through a 503", "model": MODEL},
            stream=True,
            on_chunk=lambda c: chunks.append(c.text),
            wait_s=120,
        )
    assert res.error is None, res.error
    assert "".join(chunks) == res.outputs[0].text
    assert len(_requests(emulator, "kimi")) == 2
    _count(figures, retries=1)


@pytest.mark.parametrize("status", [503, 429])
async def test_burst_longer_than_the_retries_moves_to_the_fallback_model(
    daemons: dict[str, DaemonProcess], emulator: EmulatorServer, figures, status: int
) -> None:
    emulator.script(*[{"status": status, "retry_after_ms": 50}] * (RETRIES + 1), vendor="kimi")
    res = await _chat(daemons["fallback"], f"kimi answers {status} for good")
    assert res.error is None, res.error
    assert res.metadata.provider == "glm" and res.metadata.model_extra["fallback_from"] == MODEL
    assert len(_requests(emulator, "kimi")) == RETRIES + 1
    assert len(_requests(emulator, "glm")) == 1
    _count(figures, retries=RETRIES, fallbacks=1)


@pytest.mark.parametrize(
    ("status", "code"), [(503, ErrorCode.PROVIDER_ERROR), (429, ErrorCode.RATE_LIMITED)]
)
async def test_burst_longer_than_the_retries_without_fallback_is_a_clear_error(
    daemons: dict[str, DaemonProcess],
    emulator: EmulatorServer,
    figures,
    status: int,
    code: ErrorCode,
) -> None:
    emulator.script(*[{"status": status, "retry_after_ms": 50}] * (RETRIES + 1), vendor="kimi")
    res = await _chat(daemons["plain"], f"kimi answers {status} for good, no fallback")
    assert res.error is not None and res.error.code == code, res.error
    assert res.error.retryable
    assert f"HTTP {status}" in res.error.message and "Kimi" in res.error.message
    assert res.error.details is not None and res.error.details["retries"] == RETRIES
    assert len(_requests(emulator, "kimi")) == RETRIES + 1
    assert _requests(emulator, "glm") == []
    _count(figures, retries=RETRIES)


async def test_a_retry_after_beyond_the_limit_goes_to_the_fallback_at_once(
    daemons: dict[str, DaemonProcess], emulator: EmulatorServer, figures
) -> None:
    emulator.script(
        {"status": 429, "retry_after": 120}, {"status": 429, "retry_after": 120}, vendor="kimi"
    )
    res = await _chat(daemons["fallback"], "come back in two minutes")
    assert res.error is None and res.metadata.provider == "glm", res.error
    res = await _chat(daemons["plain"], "come back in two minutes, no fallback")
    assert res.error is not None and res.error.code == ErrorCode.RATE_LIMITED
    assert res.error.retry_after_s is not None and res.error.retry_after_s >= 120
    assert len(_requests(emulator, "kimi")) == 2  # one each, neither retried
    _count(figures, fallbacks=1)
    _count(figures)


@pytest.mark.parametrize("status", [400, 401])
@pytest.mark.parametrize("setup", ["plain", "fallback"])
async def test_400_and_401_are_never_retried(
    daemons: dict[str, DaemonProcess], emulator: EmulatorServer, figures, status: int, setup: str
) -> None:
    # A plain 400 (a 400 about the context length is CONTEXT_TOO_LONG, not retried either).
    emulator.script(
        {"status": status, "error": "bad_request" if status == 400 else "auth"}, vendor="kimi"
    )
    res = await _chat(daemons[setup], f"kimi answers {status}")
    assert res.error is not None and res.error.code == ErrorCode.PROVIDER_ERROR, res.error
    assert not res.error.retryable
    assert f"HTTP {status}" in res.error.message
    if status == 401:
        assert "API key" in res.error.message
    assert len(_requests(emulator, "kimi")) == 1
    assert _requests(emulator, "glm") == []  # the caller must fix the request or the key
    _count(figures)
    section = figures.sections.setdefault("provider", {})
    section["no_retry_statuses"] = sorted({*section.get("no_retry_statuses", []), status})


@pytest.mark.parametrize("setup", ["fallback", "plain"])
async def test_storm_of_concurrent_calls_through_a_burst_of_429_and_503(
    tmp_path: Path,
    daemons: dict[str, DaemonProcess],
    emulator: EmulatorServer,
    figures,
    setup: str,
) -> None:
    calls = scaled(100, minimum=20)
    injected = calls * 5 // 2  # enough that many calls exhaust their retries
    burst = [
        {"status": 503} if i % 2 else {"status": 429, "retry_after_ms": 100}
        for i in range(injected)
    ]
    emulator.script(*burst, vendor="kimi")
    async with ExaiClient(daemons[setup].url, TOKEN) as client:
        results = await asyncio.gather(
            *(
                client.call("chat", {"prompt": f"storm call {i}", "model": MODEL}, wait_s=120)
                for i in range(calls)
            )
        )
    kimi = len(_requests(emulator, "kimi"))
    glm = len(_requests(emulator, "glm"))
    ok = [r for r in results if r.error is None]
    on_kimi = sum(r.metadata.provider == "kimi" for r in ok)
    fallbacks = sum(r.metadata.provider == "glm" for r in ok)
    # Every injected failure was answered by exactly one retry or one move to the fallback:
    # kimi saw one request per call, plus one per failure, minus the calls' last failures.
    assert kimi == injected + on_kimi
    assert glm == fallbacks
    failed = [r.error for r in results if r.error is not None]
    if setup == "fallback":
        assert failed == [], failed[:3]
        figures.record(
            "provider", storm_calls=calls, storm_failures_injected=injected, storm_calls_ok=len(ok)
        )
    else:
        assert all(
            e.code in (ErrorCode.RATE_LIMITED, ErrorCode.PROVIDER_ERROR)
            and e.retryable
            and e.details
            and e.details["retries"] == RETRIES
            for e in failed
        ), failed[:3]
        figures.record(
            "provider",
            storm_without_fallback=f"{len(ok)} of {calls} answered, "
            f"{len(failed)} clear retryable errors after {RETRIES} retries",
        )
    _count(figures, retries=kimi - calls, fallbacks=fallbacks)
