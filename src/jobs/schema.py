"""The jobs tables and their migrations, for SQLite and for Postgres.

Jobs keep their own versions in their own table (``jobs_schema_version``),
apart from the conversation store's ``schema_version`` and memory's, so the
three schemas evolve separately. Postgres scripts name their schema ``{s}``;
SQLite scripts have no schema (``{s}.`` is removed).

``job_runs`` is unique on (job_id, scheduled_for): the insert of a fire is
``ON CONFLICT DO NOTHING``, so however many daemons see a job due at once, that
fire becomes one run. The partial index ``jobs_due`` holds only jobs that can
fire, so finding the due ones among many paused or finished jobs stays cheap.

Version 2 records the grant a job was made under, beside its scopes: the
token's budget (``budget``, the ``exai_budget`` claim's shape), the credential
(``credential``: its kind, an identifier that is never the token, and a JWT's
expiry), and why a job was paused (``paused_reason``) when the daemon paused
it. Jobs made before have none recorded and run as they did.
"""

from __future__ import annotations

__all__ = ["POSTGRES_MIGRATIONS", "SQLITE_MIGRATIONS", "script"]

_V1 = """
CREATE TABLE {s}.jobs (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    scopes TEXT,
    schedule_kind TEXT NOT NULL,
    schedule_spec TEXT NOT NULL,
    timezone TEXT NOT NULL,
    anchor {real} NOT NULL,
    thread_id TEXT,
    max_retries INTEGER NOT NULL,
    backoff_s {real} NOT NULL,
    timeout_s {real},
    missed TEXT NOT NULL,
    notify TEXT,
    enabled {bool} NOT NULL,
    paused {bool} NOT NULL,
    next_run_at {real},
    created_at {real} NOT NULL,
    updated_at {real} NOT NULL,
    idempotency_key TEXT,
    disabled_reason TEXT,
    UNIQUE (owner, idempotency_key)
);
CREATE INDEX jobs_owner ON {s}.jobs(owner, created_at);
CREATE INDEX jobs_due ON {s}.jobs(next_run_at) WHERE enabled AND NOT paused;
CREATE TABLE {s}.job_runs (
    id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES {s}.jobs(id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    scheduled_for {real} NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    not_before {real} NOT NULL,
    locked_by TEXT,
    locked_until {real},
    started_at {real},
    finished_at {real},
    error_code TEXT,
    error TEXT,
    output TEXT,
    thread_id TEXT,
    manual {bool} NOT NULL,
    created_at {real} NOT NULL,
    UNIQUE (job_id, scheduled_for)
);
CREATE INDEX job_runs_pending ON {s}.job_runs(not_before) WHERE status = 'pending';
CREATE INDEX job_runs_running ON {s}.job_runs(locked_until) WHERE status = 'running';
CREATE INDEX job_runs_job ON {s}.job_runs(job_id, scheduled_for);
CREATE TABLE {s}.job_notifications (
    id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES {s}.jobs(id) ON DELETE CASCADE,
    run_id TEXT,
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    url TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at {real} NOT NULL,
    locked_until {real},
    last_error TEXT,
    created_at {real} NOT NULL,
    delivered_at {real}
);
CREATE INDEX job_notifications_pending ON {s}.job_notifications(next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX job_notifications_job ON {s}.job_notifications(job_id, created_at);
"""

_V2 = """
ALTER TABLE {s}.jobs ADD COLUMN budget TEXT;
ALTER TABLE {s}.jobs ADD COLUMN credential TEXT;
ALTER TABLE {s}.jobs ADD COLUMN paused_reason TEXT
"""

# The trace context of the call that made the job: each run's trace links to it.
_V3 = """
ALTER TABLE {s}.jobs ADD COLUMN trace_context TEXT
"""


# The models the token that made the job may use (its exai_models; a key's models).
_V4 = """
ALTER TABLE {s}.jobs ADD COLUMN models TEXT
"""


def script(template: str, *, postgres: bool) -> str:
    if postgres:
        return template.replace("{real}", "double precision").replace("{bool}", "boolean")
    return template.replace("{s}.", "").replace("{real}", "REAL").replace("{bool}", "INTEGER")


SQLITE_MIGRATIONS: list[tuple[int, str]] = [
    (1, script(_V1, postgres=False)),
    (2, script(_V2, postgres=False)),
    (3, script(_V3, postgres=False)),
    (4, script(_V4, postgres=False)),
]
POSTGRES_MIGRATIONS: list[tuple[int, str]] = [
    (1, script(_V1, postgres=True)),
    (2, script(_V2, postgres=True)),
    (3, script(_V3, postgres=True)),
    (4, script(_V4, postgres=True)),
]
