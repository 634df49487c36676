"""``python -m scripts.baseline_collection.main``: run the baseline collector.

The same command as ``exai baseline`` (see :mod:`exai.baseline.main`), except
that the default workload is ``workloads/default.toml`` next to this file, the
copy operators edit. ``make baseline`` runs it with ``--with-emulator``::

    python -m scripts.baseline_collection.main --with-emulator
    python -m scripts.baseline_collection.main --url ws://127.0.0.1:8079 --workload my.toml
    python -m scripts.baseline_collection.main compare base/baseline.json new/baseline.json
"""

from __future__ import annotations

import sys
from pathlib import Path

from exai.baseline.main import main as _main

__all__ = ["DEFAULT_WORKLOAD", "main"]

DEFAULT_WORKLOAD = Path(__file__).resolve().parent / "workloads" / "default.toml"


def main(argv: list[str] | None = None) -> int:
    return _main(argv, default_workload=DEFAULT_WORKLOAD,
                 prog="python -m scripts.baseline_collection.main")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
