"""Where budget threshold alerts go: the jobs' notification plumbing, wired once.

:class:`~exai.accounting.alerts.BudgetAlerts` decides when a principal has crossed
``EXAI_BUDGET_ALERT_AT`` of a budget; this sends what it decided to
``EXAI_BUDGET_ALERT_URL`` with :func:`exai.jobs.notify.send` (ntfy, or a webhook
signed with ``EXAI_JOBS_WEBHOOK_SECRET``), under the same address rule as a job's
notification (``EXAI_JOBS_NOTIFY_HOSTS``, no internal addresses, no redirects),
trying ``EXAI_JOBS_NOTIFY_ATTEMPTS`` times with the jobs' backoff.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx

from exai.accounting.alerts import BudgetAlerts, Send
from exai.jobs.base import Notification
from exai.jobs.notify import host_refused, send
from exai.jobs.policy import notify_delay
from exai.settings import Settings

__all__ = ["budget_alerts"]


def budget_alerts(settings: Settings, store: Any, emit: Any) -> BudgetAlerts | None:
    """The ledger's threshold alerts, or None when ``EXAI_BUDGET_ALERT_AT`` is off or
    the store cannot record them."""
    if settings.budget_alert_at <= 0 or not hasattr(store, "claim_limit_alert"):
        return None
    sender = _sender(settings) if settings.budget_alert_url else None
    return BudgetAlerts(settings.budget_alert_at, claim=store.claim_limit_alert, send=sender,
                        emit=emit, clock=time.time)  # fmt: skip


def _sender(settings: Settings) -> Send:
    s = settings
    url, kind = str(s.budget_alert_url), s.budget_alert_kind
    secret = s.jobs_webhook_secret.get_secret_value() if s.jobs_webhook_secret else None

    async def deliver(payload: dict[str, Any]) -> str | None:
        refused = host_refused(url, s.jobs_notify_hosts)
        if refused is not None:
            return refused
        now = time.time()
        note = Notification(id=uuid.uuid4().hex, job_id="", run_id=None,
                            owner=str(payload["principal"]), kind=kind, url=url,
                            payload={**payload, "title": "exai budget alert"}, status="pending",
                            attempts=0, next_attempt_at=now, last_error=None,
                            created_at=now)  # fmt: skip
        error: str | None = None
        async with httpx.AsyncClient(timeout=s.jobs_notify_timeout_s) as client:
            for attempt in range(1, max(1, s.jobs_notify_attempts) + 1):
                sent = await send(client, note, secret, time.time(), hosts=s.jobs_notify_hosts)
                if sent.error is None:
                    return None
                error = sent.error
                if not sent.retry or attempt >= s.jobs_notify_attempts:
                    break
                await asyncio.sleep(notify_delay(attempt))
        return error

    return deliver
