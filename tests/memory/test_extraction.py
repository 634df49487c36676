"""Automatic extraction: pure parsing, and the worker through a daemon and the emulator."""

from __future__ import annotations

import asyncio
import json

import pytest

from exai.memory.extraction import ExtractionError, parse_extraction
from tests.conftest import emulated_providers, make_settings, running_daemon

MESSAGE = "We decided to use SQLite for the store. I prefer terse code reviews."


def test_parse_keeps_only_what_the_message_says() -> None:
    reply = json.dumps({"memories": [
        {"content": "The team uses SQLite for the store", "type": "decision", "tags": ["db"]},
        {"content": "User prefers terse code reviews", "type": "nonsense"},
        {"content": "The user lives in Paris and owns a boat", "type": "fact"},
        {"content": 42},
    ]})  # fmt: skip
    assert parse_extraction(f"```json\n{reply}\n```", MESSAGE) == [
        {"content": "The team uses SQLite for the store", "type": "decision", "tags": ["db"]},
        {"content": "User prefers terse code reviews", "type": "fact", "tags": []},
    ]
    assert parse_extraction('{"memories": []}', MESSAGE) == []
    for bad in ("I think you like SQLite", '{"facts": []}', "[]"):
        with pytest.raises(ExtractionError):
            parse_extraction(bad, MESSAGE)


async def test_worker_extracts_off_the_call_path_and_audits_failures(
    tmp_path, provider_emulator, client_factory
):
    emulator = provider_emulator
    emulator.reset()
    audit_file = tmp_path / "audit.jsonl"
    settings = make_settings(
        tmp_path, **emulated_providers(emulator), memory_extraction_enabled=True,
        memory_extraction_model="glm-4.5-flash", memory_extraction_max_attempts=2,
        audit_enabled=True, audit_sink="jsonl", audit_jsonl_path=audit_file,
        audit_ship_interval_s=0.05, audit_flush_interval_s=0.05,
    )  # fmt: skip
    good = {"memories": [{"content": "We use SQLite for the store", "type": "decision"},
                         {"content": "The user owns a boat in Paris", "type": "fact"}]}  # fmt: skip
    emulator.script({"text": "no JSON here"}, {"text": json.dumps(good)}, vendor="glm")
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": MESSAGE, "model": "kimi-k2.6"})
        assert res.error is None, res.error
        found: list = []
        for _ in range(200):  # waits for the worker; never a timing assertion
            out = await client.call("recall", {"query": "sqlite store boat paris"})
            found = json.loads(out.outputs[0].text)["memories"]
            if found:
                break
            await asyncio.sleep(0.05)
        assert [(m["content"], m["type"]) for m in found] == [
            ("We use SQLite for the store", "decision")]  # fmt: skip
        asks = [r for r in emulator.requests if r["vendor"] == "glm"]
        assert len(asks) == 2 and asks[0]["body"]["messages"][1]["content"] == MESSAGE
        assert await daemon.services.memory.store.extraction.pending() == 0
    events = [json.loads(line) for line in audit_file.read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    failed = [e for e in events if e["kind"] == "memory_extraction_failed"]
    assert len(failed) == 1 and "not JSON" in failed[0]["error"]
    assert kinds.count("memory_written") == 1 and "memory_recalled" in kinds
    assert not any("SQLite" in json.dumps(e) for e in events if e["kind"].startswith("memory_"))
