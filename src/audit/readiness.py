"""Whether the audit trail lets the daemon answer ``/ready``: not while it is dropping events.

A daemon that drops audit events should get no new traffic, so a load balancer
that reads ``/ready`` sends calls elsewhere while it does. It is not ready

- while its undelivered events (backlog plus quarantine) are at
  ``EXAI_AUDIT_MAX_OUTBOX_EVENTS``, where the next event would be dropped, or
- for :data:`DROPPING_WINDOW_S` after the last event it dropped, so a daemon
  whose backlog hovers at the limit (a sink slower than the calls) stays out
  instead of flapping in and out with every batch shipped.

It is ready again once the backlog is below the limit and no event was dropped
within the window: after the sink comes back and the backlog drains, and after
a restart whose outbox is below the limit. The lifetime count of dropped events
(kept in the outbox) never decides readiness; it stays in ``/metrics``
(``exai_audit_dropped``) and ``exai audit status``.

Pure: the daemon calls :func:`audit_check` with :meth:`AuditTrail.stats`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["DROPPING_WINDOW_S", "audit_check"]

# Longer than a load balancer's usual run of failed probes (three at ten seconds).
DROPPING_WINDOW_S: Final = 60.0


def audit_check(stats: Mapping[str, Any], window_s: float = DROPPING_WINDOW_S) -> dict[str, Any]:
    """The ``audit`` entry of ``/ready``'s checks: ``ok``, why not, and the trail's stats."""
    limit = stats.get("max_outbox_events")
    undelivered = int(stats.get("backlog") or 0) + int(stats.get("quarantined") or 0)
    age = stats.get("last_drop_age_s")
    reason = None
    if stats.get("enabled", True) and isinstance(limit, int):
        if undelivered >= limit:
            reason = f"{undelivered} undelivered events, at the outbox limit: new ones are dropped"
        elif age is not None and age < window_s:
            reason = f"audit events were dropped {age:.0f} s ago (ready {window_s:.0f} s after)"
    check: dict[str, Any] = {"ok": reason is None, **stats}
    if reason is not None:
        check["reason"] = reason
    return check
