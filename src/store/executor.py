"""The connection interface the store's SQL runs on, and how each backend spells it.

Statements are written once, with ``?`` placeholders and a ``{p}`` table prefix;
a :class:`Dialect` rewrites them for its driver (``$1`` placeholders and the
``exai.`` schema on Postgres). An :class:`Executor` is the four calls the store
makes on a connection, whatever the driver.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Dialect", "Executor"]


class Executor(Protocol):
    """The four calls the store makes on a connection, whatever the driver."""

    async def fetch(self, sql: str, *args: Any) -> Sequence[Sequence[Any]]: ...

    async def fetchrow(self, sql: str, *args: Any) -> Sequence[Any] | None: ...

    async def execute(self, sql: str, *args: Any) -> int:
        """Run one statement; returns the number of rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


@dataclass(frozen=True)
class Dialect:
    """How a backend spells what the statements here need."""

    prefix: str = ""  # schema qualifier, "exai." on Postgres
    numbered_params: bool = False  # $1, $2... instead of ?
    lock_row: str = ""  # appended to a SELECT that must lock the thread row
    _cache: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, template: str) -> str:
        text = self._cache.get(template)
        if text is None:
            text = template.replace("{p}", self.prefix)
            if self.numbered_params:
                counter = iter(range(1, 1000))
                text = re.sub(r"\?", lambda _: f"${next(counter)}", text)
            self._cache[template] = text
        return text
