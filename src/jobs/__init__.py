"""Scheduled jobs: tool calls that run on a schedule, as their owner, into a thread.

:mod:`exai.jobs.base` is the contract, :mod:`exai.jobs.schedule` and
:mod:`exai.jobs.policy` the pure decisions, :mod:`exai.jobs.sql` the store's
rules over SQLite (:mod:`exai.jobs.sqlite`) and Postgres
(:mod:`exai.jobs.postgres`), :mod:`exai.jobs.runner` the tick, and
:mod:`exai.jobs.notify` ntfy and signed webhooks.
"""

from exai.jobs.backends import open_job_store
from exai.jobs.base import Job, JobNotFoundError, JobStore, NewJob, Notification, Run
from exai.jobs.service import JobService, JobSpec

__all__ = ["Job", "JobNotFoundError", "JobService", "JobSpec", "JobStore", "NewJob",
           "Notification", "Run", "open_job_store"]  # fmt: skip
