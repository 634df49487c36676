"""``make bench``: every benchmark, one after another, into one report.

Each module's ``main()`` prints its own markdown section and returns its figures;
this runs them in turn, prints everything, and writes ``bench-results/report.md``
and ``bench-results/figures.json``. A benchmark that fails is reported as
failed and the others still run; the exit code is then non-zero.

Run a subset with ``python -m scripts.bench.run_all protocol history``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from scripts.bench.common import BaselineMissing

__all__ = ["BENCHMARKS", "main"]

BENCHMARKS = [
    "protocol",  # daemon overhead against a bare websockets echo server
    "one_port",  # an ASGI WebSocket echo against a bare one: the cost of one port for all
    "chat_concurrency",  # 64 concurrent chat calls against a 500 ms provider
    "history",  # history assembly and appends on SQLite and Postgres
    "store_ops",  # the SQLite store's cost per operation (the hop to its threads), vs a base tree
    "prompt_cache",  # prefix kept turn to turn, and the share of prompt tokens billed cached
    "tool_rounds",  # an agent loop on a thinking model: returning tool rounds' reasoning
    "audit_latency",  # chat latency with the audit trail off, healthy, hanging
    "audit_outbox",  # emit cost, outbox ingest and shipping rates
    "shim",  # MCP through the shim against a direct WebSocket call
    "mcp1_clients",  # the mcp 1.x Python client: challenge through the shim against PAL 9.8.2
    "openai_endpoint",  # /v1/chat/completions through the daemon against the provider directly
    "model_faces",  # the three model faces against LiteLLM's, and 64 concurrent agent loops
    "agent_sessions",  # the model faces with agent sessions kept as threads, on and off
    "toolsets",  # tools/list payload per profile
    "vendor_files",  # chat with a PDF: uploaded, or its text from the upload cache
    "usage_report",  # exai usage over 100,000 cost rows against a COUNT(*) of the table
    "request_log",  # the console's request-log pages at 1,000,000 calls, SQLite and Postgres
    "memory_recall",  # memory recall by size and backend, injection cost, recall@5
    "jobs_tick",  # one scheduler tick with 10,000 jobs, 100 due, on SQLite and Postgres
    "cluster",  # what sharing through Postgres costs a call; 1, 2, 3 daemons; rate limit
    "console_pages",  # each console page with 1,000 threads and 10,000 memories, server and browser
    "keys",  # echo with a revocable key against an environment token, same run
]


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or BENCHMARKS
    out_dir = Path("bench-results")
    out_dir.mkdir(exist_ok=True)
    sections: list[str] = []
    figures: dict[str, Any] = {}
    failed = []
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        started = time.monotonic()
        buffer = io.StringIO()
        try:
            module = importlib.import_module(f"scripts.bench.{name}")
            with contextlib.redirect_stdout(buffer):
                result = module.main() if name != "audit_outbox" else module.main([])
            figures[name] = result
            text = buffer.getvalue()
        except BaselineMissing as exc:  # its comparison cannot be run here: said, not failed
            figures[name] = {"skipped": str(exc)}
            text = buffer.getvalue() + f"\n**{name} not run:** {exc}\n"
        except Exception:
            failed.append(name)
            text = buffer.getvalue() + f"\n**{name} failed:**\n\n```\n{traceback.format_exc()}```\n"
        print(text, flush=True)
        sections.append(f"{text}\n_{name}: {time.monotonic() - started:.0f} s_\n")
    (out_dir / "report.md").write_text("# exai benchmarks\n\n" + "\n".join(sections))
    (out_dir / "figures.json").write_text(json.dumps(figures, indent=2, default=str))
    print(f"\nwrote {out_dir / 'report.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
