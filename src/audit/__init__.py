"""The audit trail: every connection, call, provider request and turn, recorded.

The daemon builds one :class:`AuditTrail`, calls :meth:`AuditTrail.start`
at start-up and :meth:`AuditTrail.stop` at shutdown, and calls
:meth:`AuditTrail.emit` anywhere on the call path; ``emit`` never waits.
Events flow memory -> outbox (SQLite, durable) -> sink (Supabase, Postgres,
a JSONL file, or nowhere but the local archive). See ``trail.py`` for the
flow, ``outbox.py`` for what is kept on disk and ``sinks.py`` for delivery.
"""

from exai.audit.events import COLUMNS, KINDS, EventKind, args_digest
from exai.audit.named_sink import make_sink
from exai.audit.outbox import AuditOutbox, OutboxStatus
from exai.audit.sinks import Sink, SinkError, SinkRejected, SinkUnavailable
from exai.audit.trail import AuditTrail, default_instance_id

__all__ = [
    "COLUMNS",
    "KINDS",
    "AuditOutbox",
    "AuditTrail",
    "EventKind",
    "OutboxStatus",
    "Sink",
    "SinkError",
    "SinkRejected",
    "SinkUnavailable",
    "args_digest",
    "default_instance_id",
    "make_sink",
]
