"""``exai baseline``: the baseline metrics collector (run, compare, upload).

The parser and the actions live in :mod:`exai.baseline.main` so that the
operator script ``scripts/baseline_collection/main.py`` and this subcommand are
one implementation.
"""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from exai.baseline.main import configure_parser

    p = sub.add_parser("baseline", help="measure a daemon's latency and success rate; compare runs",
                       description="Run a workload against a daemon and write JSON, CSV, "
                                   "markdown and charts; or compare two runs.")  # fmt: skip
    configure_parser(p)
