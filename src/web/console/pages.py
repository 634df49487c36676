"""Every route of the console: its own and its pages', put together here, above both.

The pages (:mod:`.signin`, :mod:`.threads`, :mod:`.jobs`, :mod:`.memories`,
:mod:`.spend`, :mod:`.operator`, :mod:`.keys`, :mod:`.request_log`,
:mod:`.usage`) are each handed the :class:`~exai.web.console.app.Console`; the
console imports none of them, so no import goes round in a circle.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from exai.web.console import (
    jobs,
    keys,
    memories,
    operator,
    request_log,
    signin,
    spend,
    threads,
    usage,
)
from exai.web.console.app import Console

__all__ = ["routes"]


def routes(console: Console) -> list[BaseRoute]:
    """The console's routes and every page's, each saving its session's flashes."""
    return console.saving_flashes([
        *console.own_routes(),
        *signin.routes(console),
        *threads.routes(console),
        *jobs.routes(console),
        *memories.routes(console),
        *spend.routes(console),
        *operator.routes(console),
        *keys.routes(console),
        *request_log.routes(console),
        *usage.routes(console),
    ])  # fmt: skip
