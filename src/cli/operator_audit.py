"""What an operator's command changed, in the audit trail.

``exai keys`` and ``exai limits`` change the store directly, with no daemon in
between, so no daemon's audit trail sees them. They record their events here
instead: into the local audit outbox of ``EXAI_DATA_DIR`` (the file the daemons'
audit writer reads), stamped, with secrets masked as a daemon's events are, and
the writer ships them with its own (docs/audit.md). With the audit trail off
(``EXAI_AUDIT_ENABLED=false``) nothing is kept, as for a daemon.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from exai.settings import Settings

__all__ = ["OperatorAudit"]


class OperatorAudit:
    """Collects a command's events (:meth:`emit`, as a daemon's audit trail takes
    them) and writes them to the outbox in one transaction (:meth:`flush`)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._events: list[dict[str, Any]] = []
        self.instance_id = f"{socket.gethostname()}-cli-{os.getpid()}"

    def emit(self, kind: str, /, **fields: Any) -> None:
        if not self._settings.audit_enabled:
            return
        from exai.audit.events import new_event
        from exai.audit.scrub import PLAIN_TYPES, Scrubber, secrets_from_settings

        # As a daemon's trail does: fields of plain values are kept as given (a key's
        # id is no secret), anything else is copied through the scrubber.
        if any(type(value) not in PLAIN_TYPES for value in fields.values()):
            fields = Scrubber(secrets_from_settings(self._settings)).scrub(fields)
        self._events.append(new_event(kind, self.instance_id, fields))

    def flush(self) -> None:
        if not self._events:
            return
        from exai.audit.outbox import AuditOutbox

        outbox = AuditOutbox(self._settings.outbox_path,
                             max_events=self._settings.audit_max_outbox_events)  # fmt: skip
        outbox.open()
        try:
            outbox.append(self._events)
        finally:
            outbox.close()
        self._events.clear()
