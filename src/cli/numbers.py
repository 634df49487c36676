"""Numbers on the command line: parsed, finite and within the range a command can use.

``argparse``'s ``type=float`` takes ``1e308``, ``inf`` and ``nan``, and a command
that turns them into a date or a duration then dies with a traceback. Every
numeric option of ``exai`` is declared with :func:`number` instead, so a value
out of range is refused by the parser with one line naming the option and the
range, before the command runs.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["number"]


def number(low: float, high: float, *, integer: bool = False) -> Callable[[str], float | int]:
    """An ``argparse`` type: a finite number from ``low`` to ``high`` (an integer when asked)."""
    kind = "a whole number" if integer else "a number"

    def parse(text: str) -> float | int:
        try:
            value: float | int = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {kind} from {low:g} to {high:g}, not {text[:40]!r}"
            ) from None
        finite = integer or math.isfinite(value)  # ints compare exactly at any size
        if not finite or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be {kind} from {low:g} to {high:g}, not {text[:40]!r}"
            )
        return value

    parse.__name__ = kind  # argparse names the type in some messages
    return parse
