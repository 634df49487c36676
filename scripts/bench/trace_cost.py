"""What tracing costs the daemon, in instructions (callgrind), per ``echo`` call.

Wall-clock figures on a shared two-core machine move with the neighbours' load;
instruction counts do not. This runs ``exai serve`` under ``valgrind
--tool=callgrind`` with instrumentation off until the daemon is up and warm,
counts the instructions of ``--calls`` echo calls made over 50 WebSocket
connections (plus one second after them, so the daemon's hand-over of those
spans to its span writer is counted too), and reports instructions per call.
Only the daemon's process is counted: the span writer process's work
(keeping, masking, encoding, export) is not; the protocol benchmark reports its
CPU time per call (:mod:`scripts.bench.trace_rounds`).

- ``off``: this tree, no OTLP endpoint (tracing off);
- ``on``: this tree, every call sampled, exporting to a stand-in collector
  (one that answers 200 to every batch);
- ``base`` (with ``--base-src DIR``): another tree's ``src/``, e.g. main's from
  ``git archive``, to compare "off" with the code before tracing existed.

Run: ``python -m scripts.bench.trace_cost --base-src /tmp/exai-base/src``. It
needs valgrind (Debian's package) and takes a few minutes; it is not part of
``make bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.bench.common import free_port, wait_for_port
from scripts.bench.protocol import COLLECTOR, FRAME, _open, _roundtrip

__all__ = ["main"]


async def measure(env: dict[str, str], calls: int, pythonpath: str | None = None) -> int:
    """Instructions the daemon spent on ``calls`` echo calls (and the second after)."""
    data_dir = Path(tempfile.mkdtemp(prefix="exai-callgrind-"))
    port = free_port()
    out = data_dir / "callgrind.out"
    base = {"EXAI_WS_PORT": str(port), "EXAI_HTTP_PORT": "0", "EXAI_DATA_DIR": str(data_dir),
            "EXAI_LOG_LEVEL": "warning", "EXAI_RATE_LIMIT_PER_MIN": "0",
            "EXAI_AUDIT_ENABLED": "false", "EXAI_WS_TOKEN": "", "EXAI_WS_TOKENS": "",
            "EXAI_JWT_SECRET": "", "EXAI_JOBS_ENABLED": "false"}  # fmt: skip
    full_env = {**os.environ, **base, **env}
    if pythonpath:
        full_env["PYTHONPATH"] = pythonpath
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         sys.executable, "-m", "exai.cli.main", "serve"],
        env=full_env, cwd=data_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await wait_for_port(port, timeout=900)
        url = f"ws://127.0.0.1:{port}"
        warm = await _open(url, True)
        for i in range(300):
            await _roundtrip(warm, FRAME.replace('"r"', f'"w{i}"'))
        await warm.close()
        sockets = [await _open(url, True) for _ in range(50)]
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True,
                       capture_output=True)  # fmt: skip

        async def worker(k: int) -> None:
            for i in range(calls // 50):
                await _roundtrip(sockets[k], FRAME.replace('"r"', f'"c{k}-{i}"'))

        await asyncio.gather(*(worker(k) for k in range(50)))
        await asyncio.sleep(1.0)
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True,
                       capture_output=True)  # fmt: skip
        await asyncio.gather(*(ws.close() for ws in sockets))
    finally:
        proc.terminate()
        proc.wait(timeout=600)
    return _total(out)


def _total(out: Path) -> int:
    """The ``totals:`` line of a callgrind output file (its ``summary:`` line counts
    only what was collected before instrumentation was switched on: nothing)."""
    text = out.read_text(errors="replace")
    match = re.search(r"^totals:\s+(\d+)", text, re.M)
    if match is None:
        raise RuntimeError(f"no totals in {out}")
    return int(match.group(1))


async def run(
    calls: int, base_path: str | None, configs: list[str], repeat: int
) -> dict[str, float]:
    """Instructions per call of each config, the median of ``repeat`` runs (alternating)."""
    sink_port = free_port()
    sink = subprocess.Popen([sys.executable, "-c", COLLECTOR, str(sink_port)])
    traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}",
              "OTEL_TRACES_SAMPLER": "always_on", "OTEL_BSP_SCHEDULE_DELAY": "100"}  # fmt: skip
    runs: dict[str, list[float]] = {name: [] for name in configs}
    try:
        for _ in range(repeat):
            for name in configs:
                env, path = {"base": ({}, base_path), "off": ({}, None),
                             "on": (traced, None)}[name]  # fmt: skip
                runs[name].append(await measure(env, calls, pythonpath=path) / calls)
                print(f"{name}: {runs[name][-1]:,.0f} instructions per call", flush=True)
    finally:
        sink.terminate()
        sink.wait(timeout=10)
    return {name: statistics.median(values) for name, values in runs.items()}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--base-src", help="another tree's src/ to measure as 'base'")
    parser.add_argument("--configs", default="base,off,on", help="which of base,off,on")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (median)")
    args = parser.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c != "base" or args.base_src]
    base_path = None
    if args.base_src:  # a directory whose "exai" is that tree's src/, first on PYTHONPATH
        link = Path(tempfile.mkdtemp(prefix="exai-base-")) / "exai"
        link.symlink_to(Path(args.base_src).resolve())
        base_path = str(link.parent)
    results = asyncio.run(run(args.calls, base_path, configs, args.repeat))
    print("| daemon | instructions per echo call |\n|---|---|")
    for name, per_call in results.items():
        print(f"| {name} | {per_call:,.0f} |")
    return results


if __name__ == "__main__":
    main()
