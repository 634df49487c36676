"""The rule table itself: every rule has a source and a place where it is
enforced that exists, and every rule is exercised by a test in this directory."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from exai.emulators.contract import RULES, Rule, rows, rule


def test_ids_are_unique_and_every_rule_is_sourced() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for item in RULES:
        assert re.fullmatch(r"[KGB]-\d+", item.id)
        assert item.vendor == {"K": "kimi", "G": "glm", "B": "both"}[item.id[0]]
        assert item.rule and item.source and item.answer
    assert rule("K-5").vendor == "kimi"
    with pytest.raises(KeyError):
        rule("X-1")


@pytest.mark.parametrize("item", RULES, ids=lambda r: r.id)
def test_where_a_rule_is_enforced_exists(item: Rule) -> None:
    for place in item.enforced.split(", "):
        name = place.split("(")[0]
        module, *attributes = name.split(".")
        target: object = importlib.import_module(f"exai.emulators.{module}")
        for attribute in attributes:
            target = getattr(target, attribute)


def test_every_rule_is_exercised_by_a_test_here() -> None:
    here = Path(__file__).parent
    text = "\n".join(p.read_text() for p in here.glob("test_*.py") if p.name != Path(__file__).name)
    missing = [r.id for r in RULES if f"[{r.id}]" not in text]
    assert missing == []


def test_rows_are_plain_data_for_the_docs_table() -> None:
    table = rows()
    assert [r["id"] for r in table] == [r.id for r in RULES]
    assert set(table[0]) == {"id", "vendor", "rule", "source", "enforced", "answer"}
