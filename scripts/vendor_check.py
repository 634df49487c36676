"""``make vendor-check``: Moonshot's and Z.ai's documented rules, checked live.

For people who have real keys; CI never runs it with them. Keys and endpoints
come from exai's own settings (the environment, ``.env``, ``~/.config/exai/env``:
``KIMI_API_KEY``/``MOONSHOT_API_KEY``, ``KIMI_BASE_URL``, ``GLM_API_KEY``/
``ZAI_API_KEY``/``ZHIPUAI_API_KEY``, ``GLM_BASE_URL``). Each check (see
:mod:`scripts.vendor_checks`) sends a short, capped request straight to the
vendor's endpoint with httpx, so it observes the vendor and not exai; a last
section runs exai's own plugins against the same vendors.

One line per check, ``<check> [<model>]: <status> (<detail>)``, the status being
``holds``, ``does not hold``, ``observed`` (a point the vendors' pages leave open,
asked and recorded without a verdict), ``skipped`` (why) or ``error`` (what);
then a summary. Exits 0 when nothing failed, 1 when a rule did not hold, 2 when
a check could not run for an error (or the settings are invalid); 0, saying what
it would check, when no key is set.

``--list`` prints the checks with their rules and sources; ``--vendor kimi|glm``
and ``--check NAME`` (a name, or a prefix such as ``kimi.tool``) select;
``--record [DIR]`` writes every exchange (request body, status, the response
headers that matter, the body or the SSE chunks) as a JSON fixture under
``DIR/<vendor>/`` (default ``tests/fixtures/vendors/recorded/``), keys and
credentials masked, for tests/providers/test_vendor_fixtures.py to replay. Keys
are never printed: every detail passes the same masking.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from exai.settings import SettingsError, load_settings
from scripts.vendor_checks import CHECKS, Check, Endpoint, Outcome, Probe, Run, Skip

__all__ = ["DEFAULT_RECORD_DIR", "main", "select"]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECORD_DIR = ROOT / "tests" / "fixtures" / "vendors" / "recorded"
KEY_NAMES = {"kimi": "KIMI_API_KEY", "glm": "GLM_API_KEY"}
_VENDOR_ORDER = {"kimi": 0, "glm": 1}
_SECTIONS = {"vendor": "Moonshot and Z.ai over raw HTTP", "exai": "exai's own plugins"}


def select(vendor: str | None = None, names: Sequence[str] = ()) -> list[Check]:
    """The checks to run, in order: the vendors' rules (Moonshot's, then Z.ai's),
    then exai's plugins."""
    chosen = [
        c
        for c in CHECKS
        if vendor in (None, c.vendor) and (not names or any(c.name.startswith(n) for n in names))
    ]
    return sorted(chosen, key=lambda c: (c.section != "vendor", _VENDOR_ORDER[c.vendor]))


def describe(check: Check) -> str:
    return f"{check.name} [{check.model}]: {check.rule} ({check.source})"


def line(check: Check, outcome: Outcome) -> str:
    detail = " ".join(outcome.detail.split())
    if len(detail) > 400:
        detail = detail[:397] + "..."
    return f"{check.name} [{check.model}]: {outcome.status}" + (f" ({detail})" if detail else "")


async def run_checks(checks: list[Check], run: Run) -> list[tuple[Check, Outcome]]:
    results: list[tuple[Check, Outcome]] = []
    section = None
    for check in checks:
        if check.section != section:
            section = check.section
            print(f"-- {_SECTIONS[section]}", flush=True)
        if check.vendor not in run.endpoints:
            outcome = Outcome("skipped", f"no {KEY_NAMES[check.vendor]} set")
        else:
            outcome = await _one(check, run)
        outcome = Outcome(outcome.status, run.scrub(outcome.detail))
        print(line(check, outcome), flush=True)
        results.append((check, outcome))
    return results


async def _one(check: Check, run: Run) -> Outcome:
    try:
        return await check.run(Probe(run, check))
    except Skip as why:
        return Outcome("skipped", str(why))
    except Exception as exc:  # a transport failure, or an answer the check could not read
        return Outcome("error", f"{type(exc).__name__}: {exc}")


def summary(results: list[tuple[Check, Outcome]]) -> str:
    counts: Counter[str] = Counter(outcome.status for _, outcome in results)
    labels = {"holds": "hold", "does not hold": "do not hold", "observed": "observed",
              "skipped": "skipped", "error": "failed with an error"}  # fmt: skip
    parts = [f"{counts[s]} {label}" for s, label in labels.items() if counts[s]]
    return f"summary: {len(results)} checks: " + ", ".join(parts)


def exit_code(results: list[tuple[Check, Outcome]]) -> int:
    statuses = {outcome.status for _, outcome in results}
    if "does not hold" in statuses:
        return 1
    return 2 if "error" in statuses else 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="make vendor-check",
        description="Check Moonshot's and Z.ai's documented rules against the live APIs.",
    )
    parser.add_argument("--list", action="store_true", help="print the checks and exit")
    parser.add_argument("--vendor", choices=sorted(KEY_NAMES), help="only this vendor's checks")
    parser.add_argument("--check", action="append", default=[], metavar="NAME",
                        help="only checks of this name or name prefix (repeatable)")  # fmt: skip
    parser.add_argument("--record", nargs="?", const=DEFAULT_RECORD_DIR, type=Path,
                        metavar="DIR", help="write each exchange as a JSON fixture under DIR "
                        f"(default {DEFAULT_RECORD_DIR.relative_to(ROOT)})")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    checks = select(args.vendor, args.check)
    if args.list:
        for check in checks:
            print(describe(check))
        return 0
    try:
        # No retries: a check reports what one request got.
        settings = load_settings(provider_max_retries=0)
    except SettingsError as exc:
        print(f"settings: {exc}", file=sys.stderr)
        return 2
    endpoints: dict[str, Endpoint] = {}
    for vendor, key, url in (("kimi", settings.kimi_api_key, settings.kimi_base_url),
                             ("glm", settings.glm_api_key, settings.glm_base_url)):  # fmt: skip
        if key is not None and key.get_secret_value():
            endpoints[vendor] = Endpoint(url, key.get_secret_value())
    wanted = sorted({c.vendor for c in checks}, key=_VENDOR_ORDER.__getitem__)
    if not any(v in endpoints for v in wanted):
        missing = " or ".join(KEY_NAMES[v] for v in wanted)
        print(f"no {missing}: nothing checked; with keys it would check:")
        for check in checks:
            print(f"  {check.name} [{check.model}]: {check.rule}")
        return 0
    run = Run(settings=settings, endpoints=endpoints, record_dir=args.record)  # type: ignore[arg-type]
    results = asyncio.run(_run(checks, run))
    print(summary(results))
    if run.recorder.written:
        print(f"recorded {len(run.recorder.written)} exchanges under {args.record}")
    return exit_code(results)


async def _run(checks: list[Check], run: Run) -> list[tuple[Check, Outcome]]:
    try:
        return await run_checks(checks, run)
    finally:
        await run.aclose()


if __name__ == "__main__":
    sys.exit(main())
