"""Child process for the crash test: emit audit events until killed, or drain and exit.

Settings come from the environment, as for the daemon. ``emit`` mode never
stops on its own; the test SIGKILLs it. ``drain`` mode ships the outbox left
behind and exits 0 once it is empty.
"""

from __future__ import annotations

import asyncio
import sys

from exai.audit import AuditTrail
from exai.logs import configure_logging
from exai.settings import load_settings


async def main(mode: str) -> None:
    configure_logging(level="warning")
    trail = AuditTrail(load_settings(), instance_id=f"child-{mode}")
    await trail.start()
    print("started", flush=True)
    if mode == "emit":
        sequence = 0
        while True:
            for _ in range(50):
                trail.emit("call_started", request_id=str(sequence), tool="chat")
                sequence += 1
            await asyncio.sleep(0.005)
    while trail.stats()["backlog"]:  # noqa: ASYNC110 (a counter, not an event, says when)
        await asyncio.sleep(0.02)
    await trail.stop()
    print("drained", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
