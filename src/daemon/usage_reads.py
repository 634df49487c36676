"""The Usage page's read: calls, tokens and cost per day, key, principal, model and face.

Part of :class:`exai.daemon.reads.CoreReads`. Everyone's usage is the operator's
view (the check is :meth:`~exai.daemon.operator_reads.OperatorReads._require_admin`,
so no face can show it to anyone else by forgetting a check of its own); anyone
may read their own, which is asked of the store by their principal's name and so
holds nobody else's calls. The figures are the store's daily sums
(:mod:`exai.store.usage`), made readable by :func:`exai.accounting.report.sums_report`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from exai.accounting.report import day_span, sums_report
from exai.errors import ValidationError_
from exai.store.usage import UsageSum

if TYPE_CHECKING:
    from exai.auth import Principal
    from exai.daemon.core_view import CoreView

__all__ = ["UsageReads", "fold"]

MAX_DAYS: Final = 366
SPLITS: Final = ("model", "face")


class UsageReads:
    _core: CoreView

    def _require_admin(self, principal: Principal) -> None:
        raise NotImplementedError  # OperatorReads's, before this in CoreReads's order

    async def usage(
        self, principal: Principal, *, days: int = 30, since: str = "", until: str = "",
        split: str = "model", everyone: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        if everyone:
            self._require_admin(principal)
        if split not in SPLITS:
            raise ValidationError_(f"split is {' or '.join(SPLITS)}, not {split!r}")
        try:
            first_day, end_day = day_span(time.time(), since=since.strip() or None,
                                          until=until.strip() or None, days=days)  # fmt: skip
        except ValueError as exc:
            raise ValidationError_(str(exc)) from None
        if end_day - first_day > MAX_DAYS:
            raise ValidationError_(f"a period is at most {MAX_DAYS} days")
        store = self._core.services.store
        has_sums = store is not None and hasattr(store, "usage_sums")
        who = None if everyone else principal.name
        names: dict[str, str] = {}
        if has_sums and hasattr(store, "keys_and_jtis"):
            _, keys, _ = await store.keys_and_jtis()
            names = {k.id: k.name for k in keys if k.name and (everyone or k.principal == who)}
        out: dict[str, Any] = {"first_day": first_day, "end_day": end_day, "split": split}

        async def sums(by: str, split_by: str | None = None) -> list[UsageSum]:
            if not has_sums:
                return []
            found: list[UsageSum] = await store.usage_sums(first_day, end_day, by, split_by,
                                                           principal=who)  # fmt: skip
            return found

        # Three queries, not five: a dimension is folded out of a two-level answer where
        # one holds it (the days split by model hold the models; each key is one
        # principal's, so keys by principal hold both).
        other = "face" if split == "model" else "model"
        per_day = await sums("day", split)
        reports: dict[str, tuple[list[UsageSum], str, str | None]] = {
            "days": (per_day, "day", split), split + "s": (fold(per_day, "split"), split, None),
            other + "s": (await sums(other), other, None),
        }  # fmt: skip
        if everyone:
            by_key = await sums("principal", "key")
            reports["keys"] = (fold(by_key, "split"), "key", None)
            reports["principals"] = (fold(by_key, "key"), "principal", None)
        else:
            reports["keys"] = (await sums("key"), "key", None)
        for name, (found, by, split_by) in reports.items():
            out[name] = sums_report(found, by, split_by, first_day, end_day, names)
        return out


def fold(sums: list[UsageSum], keep: str) -> list[UsageSum]:
    """Two-level sums summed over one level: ``keep`` ``"key"`` (the group) or
    ``"split"``, per currency, in the order the store gives."""
    held: dict[tuple[str | None, str | None], list[int]] = {}
    for s in sums:
        name = s.key if keep == "key" else s.split
        values = held.setdefault((name, s.currency), [0] * 6)
        for i, v in enumerate((s.calls, s.errors, s.model_calls, s.prompt_tokens,
                               s.completion_tokens, s.cost)):  # fmt: skip
            values[i] += v
    ordered = sorted(held.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or ""))
    return [UsageSum(name, None, currency, *values) for (name, currency), values in ordered]
