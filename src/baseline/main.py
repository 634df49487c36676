"""The collector's command line, shared by ``exai baseline`` and the operator script.

Three actions share one parser:

- ``exai baseline [--workload FILE] [--url URL | --with-emulator] [--out DIR] [--upload]``
  runs a workload set and writes JSON, CSV, markdown and charts to ``--out``;
- ``exai baseline compare BASE.json NEW.json [--threshold 10%]`` prints the
  deltas and exits 1 when a regression is beyond the thresholds;
- ``exai baseline upload RESULT.json`` stores a run's summary in Supabase.

Exit codes: 0 done, 1 a regression / an aborted run / a failed upload / a run the
daemon's rate limiter cut into (its figures measure the limiter), 2 a usage, workload
or connection problem (nothing measured).

A daemon with default settings admits ``EXAI_RATE_LIMIT_PER_MIN`` (1200) calls a
minute per principal after a burst of ``EXAI_RATE_LIMIT_BURST`` (200); the default
workload makes thousands in a few seconds. ``--url`` runs say so before they start,
and end with exit 1 and the setting to change when calls came back
``RATE_LIMITED``. ``--with-emulator`` runs a daemon without the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["configure_parser", "main"]

_DEFAULT_WORKLOAD = "default_workload.toml"
_DEFAULT_BURST = 200  # EXAI_RATE_LIMIT_BURST's default
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def configure_parser(p: argparse.ArgumentParser, default_workload: Path | None = None) -> None:
    """Add the collector's options to ``p`` (``exai baseline`` or the script's own parser)."""
    p.add_argument(
        "--workload",
        type=Path,
        default=default_workload,
        help="workload TOML file (default: the built-in default workload)",
    )
    p.add_argument("--url", help="daemon URL (default: ws://EXAI_WS_HOST:EXAI_WS_PORT)")
    p.add_argument("--token", help="token (default: EXAI_WS_TOKEN)")
    p.add_argument(
        "--with-emulator",
        action="store_true",
        help="run against a throwaway in-process daemon and the provider emulator",
    )
    p.add_argument(
        "--emulator-latency-ms",
        type=float,
        default=0.0,
        help="latency of every emulated provider reply (with --with-emulator)",
    )
    p.add_argument(
        "--out", type=Path, help="results directory (default: results/baseline/<UTC timestamp>)"
    )
    p.add_argument("--call-timeout", type=float, help="per-call deadline in seconds (default 30)")
    p.add_argument("--no-charts", action="store_true", help="skip the PNG charts")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument(
        "--upload",
        action="store_true",
        help="also store the summary in Supabase (needs SUPABASE_URL and "
        "SUPABASE_SERVICE_ROLE_KEY)",
    )
    p.set_defaults(func=_run)

    sub = p.add_subparsers(dest="baseline_command", metavar="ACTION")
    c = sub.add_parser("compare", help="compare two result files; exit 1 on a regression")
    c.add_argument("base", type=Path, help="the reference run (baseline.json)")
    c.add_argument("new", type=Path, help="the run to judge (baseline.json)")
    c.add_argument(
        "--threshold",
        type=_threshold,
        default=10.0,
        help="relative change that counts as a regression (default 10%%)",
    )
    c.add_argument(
        "--min-delta-ms",
        type=float,
        default=1.0,
        help="latency changes smaller than this never count (default 1 ms)",
    )
    c.add_argument(
        "--success-drop",
        type=float,
        default=1.0,
        help="success-rate drop in percentage points that counts (default 1)",
    )
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")
    c.set_defaults(func=_compare)

    u = sub.add_parser("upload", help="store a result file's summary in Supabase")
    u.add_argument("result", type=Path, help="a baseline.json")
    u.set_defaults(func=_upload)


def main(argv: list[str] | None = None, *, default_workload: Path | None = None,
         prog: str = "exai baseline") -> int:  # fmt: skip
    parser = argparse.ArgumentParser(prog=prog, description="exai baseline metrics collector")
    configure_parser(parser, default_workload)
    args = parser.parse_args(argv)
    return int(args.func(args))


def _threshold(text: str) -> float:
    from exai.baseline.compare import parse_threshold

    try:
        return parse_threshold(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"bad threshold {text!r}: {exc}") from None


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"exai baseline: {message}", file=sys.stderr)
    return code


# --- run ---------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    from exai.audit.scrub import log_scrubber
    from exai.baseline.workload import WorkloadError, load_workloads, parse_workloads
    from exai.logs import configure_logging

    try:
        if args.workload is not None:
            workloads, source = load_workloads(args.workload), str(args.workload)
        else:
            text = resources.files("exai.baseline").joinpath(_DEFAULT_WORKLOAD).read_text("utf-8")
            workloads, source = parse_workloads(text, "(built-in default)"), "(built-in default)"
    except WorkloadError as exc:
        return _fail(str(exc))
    if args.call_timeout is not None:
        client = workloads.client.model_copy(update={"call_timeout_s": args.call_timeout})
        workloads = workloads.model_copy(update={"client": client})
    configure_logging("console", "warning", scrubber=log_scrubber())
    out_dir = args.out or Path("results") / "baseline" / datetime.now(UTC).strftime(
        "%Y%m%d-%H%M%S")  # fmt: skip
    return asyncio.run(_run_async(args, workloads, source, out_dir))


async def _run_async(args: argparse.Namespace, workloads: Any, source: str, out_dir: Path) -> int:
    from exai.baseline.sandbox import sandbox_daemon

    if not args.with_emulator:
        target = _target(args)
        if isinstance(target, int):
            return target
        url, token = target
        calls = sum(w.iterations or 0 for w in workloads.workload)
        if calls > _DEFAULT_BURST:
            print(f"exai baseline: this workload makes {calls} calls; a daemon with default "
                  "settings admits 1200 a minute per principal after a burst of 200 "
                  "(EXAI_RATE_LIMIT_PER_MIN, EXAI_RATE_LIMIT_BURST): measure one started with "
                  "EXAI_RATE_LIMIT_PER_MIN=0, or its rate limiter is what you measure",
                  file=sys.stderr)  # fmt: skip
        return await _measure(args, workloads, source, out_dir, url, token, [])
    async with sandbox_daemon(args.emulator_latency_ms) as sandbox:
        for note in sandbox.notes:
            print(f"exai baseline: {note}", file=sys.stderr)
        return await _measure(args, workloads, source, out_dir, sandbox.url, sandbox.token,
                              sandbox.notes)  # fmt: skip


async def _measure(args: argparse.Namespace, workloads: Any, source: str, out_dir: Path,
                   url: str, token: str | None, notes: list[str]) -> int:  # fmt: skip
    from exai.baseline.client import BaselineClient
    from exai.baseline.progress import Progress, ProgressBar
    from exai.baseline.report import write_outputs
    from exai.baseline.runner import UnknownToolsError, run_workloads
    from exai.client import ClientError

    progress = Progress() if args.no_progress else ProgressBar()
    context = {"workload_file": source, "notes": notes}
    try:
        async with BaselineClient(url, token, workloads.client) as client:
            result = await run_workloads(client, workloads, progress=progress, context=context)
    except UnknownToolsError as exc:
        return _fail(f"{exc}\nnothing was run.")
    except ClientError as exc:
        return _fail(f"cannot run against {url}: {exc}")
    for skip in result.skipped:
        print(f"exai baseline: skipped {skip['workload']}: {skip['reason']}", file=sys.stderr)
    written = await asyncio.to_thread(write_outputs, result, out_dir, charts=not args.no_charts)
    print(written["markdown"].read_text(encoding="utf-8"))
    print(f"results in {out_dir}: " + ", ".join(p.name for p in written.values()))
    code = EXIT_OK
    limited = sum(s.errors_by_code.get("RATE_LIMITED", 0) for s in result.summary.values())
    if limited:
        total = sum(s.calls for s in result.summary.values())
        code = _fail(f"{limited} of {total} calls ({limited / max(total, 1):.0%}) were refused "
                     "by the daemon's rate limiter (RATE_LIMITED), so these figures measure the "
                     "limiter: restart the daemon with EXAI_RATE_LIMIT_PER_MIN=0 (no limit) "
                     "for a baseline", EXIT_FAILED)  # fmt: skip
    if result.run.get("aborted"):
        code = _fail(f"run aborted: {result.run['aborted']}", EXIT_FAILED)
    if args.upload:
        code = max(code, await _upload_result(result))
    return code


def _target(args: argparse.Namespace) -> tuple[str, str | None] | int:
    from exai.settings import SettingsError, load_settings

    if args.url and args.token:
        return args.url, args.token
    try:
        s = load_settings()
    except SettingsError as exc:
        return _fail(str(exc))
    url = args.url or f"ws://{s.ws_host}:{s.ws_port}"
    token = args.token or (s.ws_token.get_secret_value() if s.ws_token else None)
    return url, token


# --- compare and upload ----------------------------------------------------------


def _compare(args: argparse.Namespace) -> int:
    from exai.baseline.compare import Thresholds, compare
    from exai.baseline.results import ResultError, load_result

    try:
        base, new = load_result(args.base), load_result(args.new)
    except ResultError as exc:
        return _fail(str(exc))
    thresholds = Thresholds(args.threshold, args.min_delta_ms, args.success_drop)
    comparison = compare(base, new, thresholds)
    if args.json:
        rows = [{**asdict(r), "delta": r.delta, "delta_pct": r.delta_pct} for r in comparison.rows]
        print(json.dumps({"base": comparison.base_id, "new": comparison.new_id,
                          "thresholds": asdict(thresholds), "rows": rows,
                          "only_in_base": comparison.only_in_base,
                          "only_in_new": comparison.only_in_new,
                          "regressions": len(comparison.regressions)}, indent=1))  # fmt: skip
    else:
        print(comparison.render_markdown())
    return EXIT_FAILED if comparison.regressions else EXIT_OK


def _upload(args: argparse.Namespace) -> int:
    from exai.baseline.results import ResultError, load_result

    try:
        result = load_result(args.result)
    except ResultError as exc:
        return _fail(str(exc))
    return asyncio.run(_upload_result(result))


async def _upload_result(result: Any) -> int:
    from exai.baseline.upload import TABLE, UploadError, upload_summary
    from exai.settings import SettingsError, load_settings

    try:
        s = load_settings()
    except SettingsError as exc:
        return _fail(str(exc))
    key = s.supabase_service_role_key.get_secret_value() if s.supabase_service_role_key else ""
    if not s.supabase_url or not key:
        return _fail("upload needs SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY", EXIT_FAILED)
    try:
        sent = await upload_summary(result, s.supabase_url, key)
    except UploadError as exc:
        return _fail(f"upload failed: {exc}", EXIT_FAILED)
    print(f"uploaded {sent} summary rows of run {result.run_id} to {TABLE}", file=sys.stderr)
    return EXIT_OK
