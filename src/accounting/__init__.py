"""Accounting: what calls cost, who spent it, and the budgets that bound spending.

:mod:`exai.accounting.budgets` holds the budget rule (pure);
:mod:`exai.accounting.ledger` the per-daemon :class:`Ledger` that applies it
before each model call and queues one cost row per call for the store. Prices
and the cost of one call are :mod:`exai.providers.pricing`'s.
"""

from __future__ import annotations

# The ledger is imported from its module: it needs the store, and the budgets
# are needed by modules the store itself imports (auth).
from exai.accounting.budgets import Budget, parse_budget, parse_budgets

__all__ = ["Budget", "parse_budget", "parse_budgets"]
