"""The baseline metrics collector: how fast and how reliable a daemon is, run to run.

Read top to bottom: :mod:`~exai.baseline.workload` (what to run, from TOML),
:mod:`~exai.baseline.client` (a measuring client on :class:`exai.client.ExaiClient`),
:mod:`~exai.baseline.runner` (tools checked, workers driven, records kept),
:mod:`~exai.baseline.stats` and :mod:`~exai.baseline.results` (the numbers and the
document), :mod:`~exai.baseline.report` and :mod:`~exai.baseline.charts` (files),
:mod:`~exai.baseline.compare` (regressions), :mod:`~exai.baseline.upload`
(Supabase), :mod:`~exai.baseline.sandbox` (a throwaway daemon) and
:mod:`~exai.baseline.main` (the command line).
"""

from exai.baseline.client import BaselineClient, ClientConfig
from exai.baseline.records import CallRecord
from exai.baseline.results import RunResult, load_result
from exai.baseline.runner import UnknownToolsError, run_workloads
from exai.baseline.workload import Workload, WorkloadSet, load_workloads

__all__ = [
    "BaselineClient",
    "CallRecord",
    "ClientConfig",
    "RunResult",
    "UnknownToolsError",
    "Workload",
    "WorkloadSet",
    "load_result",
    "load_workloads",
    "run_workloads",
]
