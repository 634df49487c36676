"""The checks behind ``make vendor-check`` (scripts/vendor_check.py): Moonshot's and
Z.ai's documented rules tested against the live APIs (:mod:`.kimi`, :mod:`.glm`),
then exai's own plugins against them (:mod:`.through_exai`). :mod:`.probe` holds
what they share. Importing the package registers every check, in the order they run.
"""

from __future__ import annotations

from . import glm, kimi, through_exai  # noqa: F401  (registers the checks)
from .probe import CHECKS, Check, Endpoint, Outcome, Probe, Recorder, Run, Skip

__all__ = ["CHECKS", "Check", "Endpoint", "Outcome", "Probe", "Recorder", "Run", "Skip"]
