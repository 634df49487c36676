"""Scheduled jobs: their store, the tick and its lease, limits and notifications."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr

from exai.settings.fields import CommaList, group

__all__ = ["JobsSettings"]

_jobs = group("jobs")


class JobsSettings(BaseModel):
    jobs_enabled: bool = _jobs(
        True,
        "Scheduled jobs: the daemon ticks and runs due jobs; the "
        "schedule, jobs and unschedule tools.",
    )
    jobs_url: str | None = _jobs(
        None,
        "Where jobs are stored: sqlite:///path or postgresql://... Unset: jobs.sqlite3 in "
        "the data directory, or the conversation store's Postgres when EXAI_STORE_URL is one.",
    )
    jobs_tick_s: float = _jobs(1.0, "Seconds between two ticks of the scheduler.", gt=0)
    jobs_lease_s: float = _jobs(
        60.0,
        "A running job's lease: renewed while it runs; a run whose lease passed (its "
        "daemon died) is taken up again.",
        gt=0,
    )
    jobs_batch: int = _jobs(10, "Most runs one daemon starts per tick.", ge=1)
    jobs_misfire_grace_s: float = _jobs(
        60.0, "A fire later than this is a missed fire, handled by the job's missed policy.", ge=0
    )
    jobs_min_interval_s: float = _jobs(60.0, "Shortest interval schedule accepted.", gt=0)
    jobs_max_per_principal: int = _jobs(100, "Most jobs one principal may have.", ge=1)
    jobs_webhook_secret: SecretStr | None = _jobs(
        None,
        "Key of the HMAC-SHA256 signature (X-Exai-Signature) on webhook notifications.",
    )
    jobs_notify_attempts: int = _jobs(
        5, "Tries per notification before it is kept as undeliverable.", ge=1
    )
    jobs_notify_timeout_s: float = _jobs(10.0, "Timeout of one notification request.", gt=0)
    jobs_notify_hosts: CommaList = Field(
        default_factory=list,
        description="Hosts a job's notification URL may name, comma-separated (ntfy.sh,"
        "hooks.example.com, or an address such as 127.0.0.1); a host named here may resolve "
        "anywhere. Empty: any host, except one that is or resolves to an internal address "
        "(loopback, link-local, private, unspecified, their IPv6 forms), checked when a job "
        "is made and again on the address each send connects to.",
        json_schema_extra={"group": "jobs"},
    )
