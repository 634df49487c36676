"""The console's pages with a full store: 1,000 threads, 10,000 memories, 100 jobs.

A data directory is filled first, outside any timing (SQLite, as ``make run``
uses): 1,000 threads of 4 turns each for one principal, with a cost row per
turn spread over 30 days, 10,000 memories and 100 jobs (the most one principal
may have). Then ``exai serve`` runs on it in a subprocess, and each page is
timed two ways, in one run:

1. **Server-side**: the whole HTML response, signed in, from an HTTP client on
   the same machine (httpx, kept-alive), 30 requests per page after a warm-up;
   the baseline is ``GET /health`` on the same listener in the same run, the
   floor of any answer from it.
2. **In the browser**: headless Chromium (Debian's, driven by Playwright) loads
   each page 8 times; the figures are the Navigation Timing entries of the
   page itself: ``responseEnd`` (request sent to the last byte of the HTML) and
   ``loadEventEnd`` (everything, styles and script included, parsed and laid
   out), from the start of the navigation.

Run: ``python -m scripts.bench.console_pages`` (``make bench`` runs it with the rest).
"""

from __future__ import annotations

import asyncio
import random
import re
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from exai.jobs.backends import open_job_store
from exai.jobs.base import NewJob
from exai.jobs.schedule import next_fire, parse_schedule
from exai.memory.backends import open_memory_store
from exai.memory.base import NewMemory
from exai.memory.ranking import content_hash
from exai.settings import Settings
from exai.store import open_store
from exai.store.costs import CostRow
from scripts.bench.common import bench_dir, daemon_process, free_port, prose, summarize

__all__ = ["main"]

OWNER, TOKEN = "bench", "bench-token-0123456789"
THREADS, TURNS, MEMORIES, JOBS = 1_000, 4, 10_000, 100
SERVER_RUNS, BROWSER_RUNS = 30, 8
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


async def fill(data_dir: Path) -> dict[str, Any]:
    """Fill the stores the daemon will open; returns ids the pages need."""
    settings = Settings(_env_file=None, data_dir=data_dir)  # type: ignore[call-arg]
    rng = random.Random(27)
    now = time.time()
    store = await open_store(settings)
    rows: list[CostRow] = []
    thread_id = ""
    for i in range(THREADS):
        at = now - rng.uniform(0, 29) * 86400
        for turn in range(TURNS):
            request = f"fill-{i}-{turn}"
            messages = [
                {"role": "user", "content": f"question {i}.{turn}: " + prose(rng, 200)},
                {"role": "assistant", "content": prose(rng, 900)},
            ]
            usage = {"prompt_tokens": 300 + 250 * turn, "completion_tokens": 220}
            if turn == 0:
                thread, _ = await store.start_thread(
                    OWNER,
                    messages,
                    title=f"thread {i}: " + prose(rng, 40),
                    request_id=request,
                    model="kimi-k2.6",
                    provider="kimi",
                    usage=usage,
                )
                thread_id = thread.id
            else:
                await store.append(
                    thread_id,
                    OWNER,
                    messages,
                    request_id=request,
                    model="kimi-k2.6",
                    provider="kimi",
                    usage=usage,
                )
            nanos = rng.randint(200_000, 900_000)
            rows.append(
                CostRow(
                    at,
                    "fill",
                    OWNER,
                    rng.choice(["chat", "codereview", "thinkdeep"]),
                    "",
                    request,
                    thread_id,
                    rng.choice(["kimi-k2.6", "glm-5.1"]),
                    "kimi",
                    300,
                    100,
                    220,
                    0,
                    "USD",
                    nanos // 2,
                    0,
                    nanos // 2,
                    nanos,
                )
            )
    await store.record_costs(rows)
    await store.aclose()

    memory = await open_memory_store(settings)
    batch = []
    for i in range(MEMORIES):
        text = f"memory {i}: " + prose(rng, 120)
        batch.append(
            (
                NewMemory(
                    OWNER,
                    text,
                    rng.choice(["fact", "preference", "rule"]),
                    content_hash(text),
                    ["bench"],
                ),
                None,
            )
        )
    await memory.insert_many(batch, None)
    await memory.aclose()

    jobs = await open_job_store(settings)
    job_id = ""
    for i in range(JOBS):
        schedule = parse_schedule("cron", f"{i % 60} {i % 24} * * *", "UTC", anchor=now)
        job, _ = await jobs.create_job(
            NewJob(
                OWNER, f"job {i}", "chat", {"prompt": f"run {i}"}, schedule, thread_id=thread_id
            ),
            next_fire(schedule, now),
            now,
        )
        job_id = job.id
    await jobs.aclose()
    return {"thread": thread_id, "job": job_id}


async def sign_in(http: httpx.AsyncClient) -> None:
    form = await http.get("/console/login")
    token = re.search(r'name="login_token" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
    done = await http.post("/console/login", data={"login_token": token, "token": TOKEN})
    assert done.status_code == 303, done.text


async def server_side(base: str, pages: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        await sign_in(http)
        for name, path in {"baseline: GET /health": "/health", **pages}.items():
            for _ in range(3):
                response = await http.get(path)
                assert response.status_code == 200, (path, response.status_code)
            samples = []
            for _ in range(SERVER_RUNS):
                started = time.perf_counter()
                response = await http.get(path)
                samples.append(time.perf_counter() - started)
            out[name] = {**summarize(samples), "bytes": len(response.content)}
    return out


def in_browser(base: str, pages: dict[str, str]) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    out: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page()
        page.goto(base + "/console/login")
        page.fill("#token", TOKEN)
        page.press("#token", "Enter")
        page.wait_for_url(base + "/console/threads")
        for name, path in pages.items():
            page.goto(base + path)  # warm-up
            response_end, load_end = [], []
            for _ in range(BROWSER_RUNS):
                page.goto(base + path, wait_until="load")
                timing = page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return [n.responseEnd, n.loadEventEnd]; }"
                )
                response_end.append(timing[0])
                load_end.append(timing[1])
            out[name] = {
                "response_end_ms": statistics.median(response_end),
                "load_end_ms": statistics.median(load_end),
            }
        browser.close()
    return out


async def run(with_browser: bool) -> dict[str, Any]:
    data_dir = Path(bench_dir("exai-bench-console-"))
    started = time.monotonic()
    ids = await fill(data_dir)
    fill_s = time.monotonic() - started
    http_port = free_port()
    pages = {
        "threads (list, newest 50)": "/console/threads",
        "threads, searched by text": "/console/threads?q=question+999.3",
        "one thread (4 turns)": f"/console/threads/{ids['thread']}",
        "jobs (100)": "/console/jobs",
        "one job": f"/console/jobs/{ids['job']}",
        "memories (newest 50 of 10,000)": "/console/memories",
        "memories, searched (recall)": "/console/memories?q=memory+4242",
        "spend (30 days, 4,000 cost rows)": "/console/spend",
        "operator: everyone's spend": "/console/admin/spend",
        "operator: health": "/console/admin/health",
    }
    env = {
        "EXAI_DATA_DIR": str(data_dir),
        "EXAI_HTTP_PORT": str(http_port),
        "EXAI_WS_TOKENS": f"{OWNER}={TOKEN}",
        "EXAI_ADMIN_PRINCIPALS": OWNER,
        "EXAI_TOOL_PROFILE": "full",
        "EXAI_JOBS_TICK_S": "3600",
    }
    async with daemon_process(**env):
        base = f"http://127.0.0.1:{http_port}"
        server = await server_side(base, pages)
        browser = await asyncio.to_thread(in_browser, base, pages) if with_browser else {}
    return {"fill_s": fill_s, "server": server, "browser": browser}


def main() -> dict[str, Any]:
    figures = asyncio.run(run(CHROMIUM.exists()))
    print("### Console pages (`scripts/bench/console_pages.py`)\n")
    print(
        f"One principal holding {THREADS:,} threads of {TURNS} turns, {MEMORIES:,} memories "
        f"and {JOBS} jobs (SQLite; filled in {figures['fill_s']:.0f} s, outside the timing). "
        f"Server-side: {SERVER_RUNS} signed-in GETs per page from httpx on the same machine; "
        f"in the browser: headless Chromium, median of {BROWSER_RUNS} loads (Navigation "
        "Timing).\n"
    )
    print(
        "| page | server p50 | server p95 | HTML bytes | browser: HTML received | browser: loaded |"
    )
    print("|---|---|---|---|---|---|")
    for name, s in figures["server"].items():
        b = figures["browser"].get(name)
        shown = f"{b['response_end_ms']:.1f} ms | {b['load_end_ms']:.1f} ms" if b else "- | -"
        print(
            f"| {name} | {s['p50_ms']:.2f} ms | {s['p95_ms']:.2f} ms | {s['bytes']:,} | {shown} |"
        )
    if not figures["browser"]:
        print("\n(no /usr/bin/chromium: `make browser` installs it; browser figures left out)")
    return figures


if __name__ == "__main__":
    main()
