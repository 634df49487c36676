"""What a document costs a ``chat`` call, uploaded or taken from the upload cache.

Three paths through one daemon (``exai serve`` in its own process) against the
provider emulator (in another), each a new thread on a Kimi model:

- no file: the prompt alone, the baseline of the same run;
- cached PDF: a PDF this principal already uploaded, whose extracted text
  comes from the conversation store (no request to the files API);
- new PDF: a PDF never seen before, so the call uploads it, fetches its text
  and deletes the upload (three more requests to the vendor) before asking.

The emulator answers at once, so the figures are exai's own cost and the HTTP
round trips, not a vendor's extraction time (Moonshot's takes seconds for a
large PDF, which the cache saves on every later use). Measured in alternating
blocks so that drift in the machine's load affects the paths alike. Run:
``python -m scripts.bench.vendor_files``.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from exai.client import ExaiClient
from exai.emulators.files import minimal_pdf
from exai.emulators.provider import KIMI_PREFIX
from scripts.bench.common import daemon_process, free_port, summarize, wait_for_http

__all__ = ["main", "report", "run"]

MODEL = "kimi-k2.6"
PROMPT = "Summarise the attached report in one sentence."
PAGE = ["Quarterly revenue rose 12 percent on the year."] * 40


async def run(n: int = 200, rounds: int = 10, warmup: int = 10) -> dict[str, Any]:
    emulator_port = free_port()
    emulator = subprocess.Popen([sys.executable, "-m", "exai.emulators.provider", "--port",
                                 str(emulator_port)], stdout=subprocess.DEVNULL)  # fmt: skip
    files = Path(tempfile.mkdtemp(prefix="exai-bench-files-"))
    cached = files / "cached.pdf"
    cached.write_bytes(minimal_pdf(*PAGE, "cached"))
    pdf_bytes = cached.stat().st_size
    fresh = iter(range(10**9))

    def new_pdf() -> str:
        path = files / f"new-{next(fresh)}.pdf"
        path.write_bytes(minimal_pdf(*PAGE, path.name))  # new bytes: never in the cache
        return str(path)

    try:
        await wait_for_http(emulator_port)
        env = {"KIMI_API_KEY": "sk-bench",
               "KIMI_BASE_URL": f"http://127.0.0.1:{emulator_port}{KIMI_PREFIX}",
               "EXAI_ALLOWED_ROOTS": str(files)}  # fmt: skip
        async with daemon_process(**env) as (url, _pid):
            client = ExaiClient(url, None)
            await client.connect()

            async def chat(paths: list[str]) -> None:
                res = await client.call("chat", {"prompt": PROMPT, "model": MODEL, "files": paths})
                if res.error is not None:
                    raise RuntimeError(res.error.message)

            calls: dict[str, Callable[[], Awaitable[None]]] = {
                "no_file": lambda: chat([]),
                "cached_pdf": lambda: chat([str(cached)]),
                "new_pdf": lambda: chat([new_pdf()]),
            }
            samples: dict[str, list[float]] = {name: [] for name in calls}
            try:
                for call in calls.values():
                    for _ in range(warmup):
                        await call()
                for _ in range(rounds):
                    for name, call in calls.items():
                        for _ in range(n // rounds):
                            start = time.perf_counter()
                            await call()
                            samples[name].append(time.perf_counter() - start)
            finally:
                await client.close()
    finally:
        emulator.terminate()
        emulator.wait(timeout=10)
        shutil.rmtree(files, ignore_errors=True)
    results: dict[str, Any] = {name: summarize(s) for name, s in samples.items()}
    for name in ("cached_pdf", "new_pdf"):
        results[name]["added_p50_ms"] = results[name]["p50_ms"] - results["no_file"]["p50_ms"]
    results["pdf_bytes"] = pdf_bytes
    return results


_LABELS = {
    "no_file": "prompt only",
    "cached_pdf": "PDF already uploaded (text from the cache)",
    "new_pdf": "new PDF (upload, fetch text, delete)",
}


def report(results: dict[str, Any]) -> str:
    rows = ["| path | p50 | p99 | added at p50 | calls |", "|---|---|---|---|---|"]
    for name, label in _LABELS.items():
        r = results[name]
        added = f"{r['added_p50_ms']:+.2f} ms" if "added_p50_ms" in r else ""
        rows.append(f"| {label} | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | {added} "
                    f"| {r['n']} |")  # fmt: skip
    rows.append("\nSequential `chat` calls over WebSocket, each a new thread, against a "
                "provider emulator that answers at once.")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## Documents: upload or cache\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
