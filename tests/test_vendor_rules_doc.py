"""docs/vendors.md's rules table is generated from the emulator's contract and exai's
side of each rule (scripts/vendor_rules_doc.py); it must be current, cover every rule,
and name tests that exist."""

from __future__ import annotations

import ast
from pathlib import Path

from exai.emulators.contract import RULES
from scripts.vendor_rules_doc import APPLIED, BEGIN, DOC, END, table

ROOT = Path(__file__).resolve().parents[1]


def test_every_rule_has_exais_side_and_nothing_else_does():
    assert set(APPLIED) == {rule.id for rule in RULES}


def test_the_tests_named_exist():
    for rule_id, (_, tests) in APPLIED.items():
        for node in (t.strip() for t in tests.split(",")):
            path, _, name = node.partition("::")
            assert (ROOT / path).is_file(), f"{rule_id}: {path} does not exist"
            if name:
                tree = ast.parse((ROOT / path).read_text())
                defined = {n.name for n in ast.walk(tree)
                           if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}  # fmt: skip
                assert name in defined, f"{rule_id}: {node} is not a test"


def test_the_docs_table_is_current():
    text = DOC.read_text()
    current = text[text.index(BEGIN) : text.index(END) + len(END) + 1]
    assert current == table(), "regenerate: python -m scripts.vendor_rules_doc --write"
