"""``exai jobs``: add, list, show, pause, resume, run-now, history and rm scheduled jobs.

The commands act on the job store ``EXAI_JOBS_URL`` names (see
:mod:`exai.jobs.backends`) as the operator: they see every principal's jobs,
and ``--owner`` narrows ``list`` to one. ``add`` creates a job for a principal
(``--owner``) with the scopes given (``--scope``, repeatable; none: every tool),
checked like the ``schedule`` tool's: the tool must exist and take the
arguments. A running daemon picks up changes on its next tick; ``run-now``
queues a run that the next tick starts.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from exai.auth import ANONYMOUS, Principal
from exai.cli.common import run_reported, say
from exai.cli.numbers import number
from exai.errors import ValidationError_
from exai.jobs import JobService, JobSpec, open_job_store
from exai.jobs.base import ANY_OWNER
from exai.jobs.schedule import split_when
from exai.settings import load_settings

__all__ = ["register"]

Action = Callable[[JobService, argparse.Namespace], Awaitable[int]]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("jobs", help="manage scheduled jobs")
    sub = parser.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)

    p = sub.add_parser("add", help="schedule a tool call")
    p.add_argument("tool")
    p.add_argument("when", help="'0 9 * * 1-5' (cron), '2026-12-01T09:00' (once) or 'every 1h'")
    p.add_argument("--args", default="{}", help="the tool's arguments as a JSON object")
    p.add_argument("--tz", default="UTC", help="IANA time zone (default: %(default)s)")
    p.add_argument("--name", default="")
    p.add_argument("--owner", default=ANONYMOUS, help="the principal (default: %(default)s)")
    p.add_argument("--scope", action="append", dest="scopes", help="a tool the owner may call")
    p.add_argument("--thread", help="continue this conversation (continuation_id)")
    p.add_argument("--max-retries", type=number(0, 10, integer=True), default=3)
    p.add_argument("--backoff", type=number(0, 86400), default=30.0,
                   help="first retry delay, seconds")  # fmt: skip
    p.add_argument("--timeout", type=number(0.001, 604800), help="each run's deadline, seconds")
    p.add_argument("--missed", choices=["run_once", "skip"], default="run_once")
    p.add_argument("--ntfy", help="ntfy topic URL to notify")
    p.add_argument("--webhook", help="webhook URL to notify (signed; EXAI_JOBS_WEBHOOK_SECRET)")
    p.add_argument("--key", help="idempotency key: adding again with it changes nothing")
    p.set_defaults(func=_command(_add))

    p = sub.add_parser("list", help="jobs, oldest first")
    p.add_argument("--owner", help="only this principal's jobs")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_command(_list))

    for name, action, text in (("show", _show, "one job, its recent runs and notifications"),
                               ("pause", _pause, "stop a job firing"),
                               ("resume", _resume, "fire again on schedule (re-enables)"),
                               ("run-now", _run_now, "queue a run now"),
                               ("rm", _rm, "delete a job and its history")):  # fmt: skip
        p = sub.add_parser(name, help=text)
        p.add_argument("id")
        p.set_defaults(func=_command(action))

    p = sub.add_parser("history", help="a job's runs, newest first")
    p.add_argument("id")
    p.add_argument("--limit", type=number(1, 10000, integer=True), default=20)
    p.set_defaults(func=_command(_history))


def _command(action: Action) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return run_reported(_with_service(action, args))

    return run


async def _with_service(action: Action, args: argparse.Namespace) -> int:
    from exai.tools.registry import ToolRegistry

    settings = load_settings()
    store = await open_job_store(settings)
    registry = ToolRegistry.from_entry_points(settings) if args.jobs_command == "add" else None
    try:
        return await action(JobService(store, settings, registry=registry), args)
    finally:
        await store.aclose()


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    try:
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return f"unreadable time ({ts!r:.40})"


_TIME_SUFFIXES = ("_at", "_for", "_until", "not_before")


def _iso_times(value: Any) -> Any:
    """``show``'s JSON with its times (``*_at``, ``scheduled_for``, ...) as ISO 8601 UTC,
    as ``list`` prints them."""
    if isinstance(value, dict):
        return {k: (_when(v) if k.endswith(_TIME_SUFFIXES) and isinstance(v, int | float)
                    and not isinstance(v, bool) else _iso_times(v))
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [_iso_times(v) for v in value]
    return value


async def _add(service: JobService, args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.args)
    except ValueError as exc:
        example = """--args '{"prompt": "..."}'"""
        raise ValueError(
            f"--args is not valid JSON ({exc}); give the tool's arguments as one JSON "
            f"object, e.g. {example}"
        ) from None
    if not isinstance(arguments, dict):
        raise ValueError("--args must be a JSON object of the tool's arguments")
    notify = ({"kind": "webhook", "url": args.webhook} if args.webhook else
              {"kind": "ntfy", "url": args.ntfy} if args.ntfy else None)  # fmt: skip
    owner = Principal(args.owner, None if args.scopes is None else frozenset(args.scopes))
    assert service.registry is not None
    if service.registry.get(args.tool) is None:
        known = ", ".join(sorted(info.name for info in service.registry.infos()))
        raise ValueError(f"unknown tool {args.tool!r}; the tools are: {known}")
    # A job refused here was described wrongly on this command line (its schedule, time
    # zone, arguments, notification): a usage error, which ValueError is to run_reported.
    try:
        kind, spec = split_when(args.when)
        job, created = await _create(service, owner, args, arguments, kind, spec, notify)
    except ValidationError_ as exc:
        if "fields" in (exc.details or {}):  # the arguments did not fit the tool's schema
            raise ValueError(f"--args: {exc} (`exai tools {args.tool}` lists them)") from None
        raise ValueError(str(exc)) from None
    print(f"{'created' if created else 'exists'} {job.id}, next run {_when(job.next_run_at)}")
    return 0


async def _create(service: JobService, owner: Principal, args: argparse.Namespace,
                  arguments: dict[str, Any], kind: str, spec: str,
                  notify: dict[str, Any] | None) -> tuple[Any, bool]:  # fmt: skip
    return await service.create(owner, JobSpec(
        tool=args.tool, arguments=arguments, schedule_kind=kind, schedule=spec,
        timezone=args.tz, name=args.name, thread_id=args.thread, max_retries=args.max_retries,
        backoff_s=args.backoff, timeout_s=args.timeout, missed=args.missed, notify=notify,
        idempotency_key=args.key,
    ))  # fmt: skip


async def _list(service: JobService, args: argparse.Namespace) -> int:
    """Every job, one line each; a row that cannot be shown is listed as unreadable
    with its id, and the listing goes on (one principal's job must not hide the rest)."""
    for job in await service.store.list_jobs(args.owner or ANY_OWNER):
        try:
            line = _line(job, as_json=args.json)
        except Exception as exc:  # whatever is wrong with this row, show the others
            why = f"{type(exc).__name__}: {exc}"[:200]
            line = (json.dumps({"id": job.id, "owner": job.owner, "unreadable": why})
                    if args.json else f"{job.id}  {job.owner:<12} unreadable: {why}")  # fmt: skip
        print(line)
    return 0


def _line(job: Any, *, as_json: bool) -> str:
    if as_json:
        return json.dumps({**job.public(), "owner": job.owner}, allow_nan=False)
    state = ("paused" if job.paused else "enabled") if job.enabled else "disabled"
    why = job.paused_reason if job.paused else job.disabled_reason
    return (f"{job.id}  {job.owner:<12} {state:<8} {job.tool:<12} "
            f"{job.schedule.kind}:{job.schedule.spec} {job.schedule.timezone}  "
            f"next {_when(job.next_run_at)}  {job.name}"
            f"{f'  ({why})' if why else ''}")  # fmt: skip


async def _show(service: JobService, args: argparse.Namespace) -> int:
    out = await service.show(args.id, ANY_OWNER)
    print(json.dumps(_iso_times(out), indent=2, default=str))
    if out["undeliverable"]:
        say(f"warning: {out['undeliverable']} notification(s) could not be delivered")
    return 0


async def _pause(service: JobService, args: argparse.Namespace) -> int:
    await service.pause(args.id, ANY_OWNER)
    print(f"paused {args.id}")
    return 0


async def _resume(service: JobService, args: argparse.Namespace) -> int:
    from exai.daemon.core import authenticator

    job = await service.resume(args.id, ANY_OWNER)
    print(f"resumed {job.id}, next run {_when(job.next_run_at)}")
    # The operator's resume keeps the job's grant: if its credential no longer
    # grants anything, a daemon configured as this shell is pauses it again.
    problem = authenticator(service.settings).credential_problem(job.owner, job.credential,
                                                                 time.time())  # fmt: skip
    if problem is not None:
        say(f"warning: it will be paused again before its next run: {problem}. Its owner "
            "can resume it with the jobs tool, under a credential of theirs")  # fmt: skip
    return 0


async def _run_now(service: JobService, args: argparse.Namespace) -> int:
    run = await service.run_now(args.id, ANY_OWNER)
    print(f"queued run {run.id}")
    return 0


async def _history(service: JobService, args: argparse.Namespace) -> int:
    for run in await service.store.runs(args.id, ANY_OWNER, args.limit):
        detail = run.error_code or (run.output or "")[:60].replace("\n", " ")
        print(f"{run.id}  {_when(run.scheduled_for)}  {run.status:<9} attempt {run.attempt}  "
              f"thread {run.thread_id or '-'}  {detail}")  # fmt: skip
    return 0


async def _rm(service: JobService, args: argparse.Namespace) -> int:
    await service.store.delete_job(args.id, ANY_OWNER)
    print(f"removed {args.id}")
    return 0
