"""``exai memory``: add, list, show, rm, export/import round trip, bulk import, reembed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from exai.cli.main import main


@pytest.fixture
def memory_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider_emulator) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXAI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EXAI_AUDIT_ENABLED", "false")
    monkeypatch.setenv("EXAI_MEMORY_URL", f"sqlite:///{tmp_path / 'one.sqlite3'}")
    return tmp_path


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_add_list_show_export_import_rm(memory_env, capsys, monkeypatch, provider_emulator):
    assert main(["memory", "add", "We chose SQLite", "--owner", "alice", "--type", "decision"]) == 0
    assert main(["memory", "add", "we chose  sqlite", "--owner", "alice"]) == 0
    assert main(["memory", "add", "Terse reviews", "--owner", "bob", "--tag", "style"]) == 0
    first, dup, _ = _lines(capsys)
    assert first.startswith("remembered ") and dup == "already remembered as " + first.split()[1]
    memory_id = first.split()[1]

    assert main(["memory", "list", "--owner", "alice", "--json"]) == 0
    listed = [json.loads(line) for line in _lines(capsys)]
    assert [(m["id"], m["type"], m["source"]) for m in listed] == [(memory_id, "decision", "cli")]
    assert main(["memory", "show", memory_id]) == 0
    assert json.loads(capsys.readouterr().out)["content"] == "We chose SQLite"

    export = memory_env / "export.jsonl"
    assert main(["memory", "export", "-o", str(export)]) == 0
    assert len(export.read_text().splitlines()) == 2

    # Into another store, with vectors from the emulator's OpenAI-compatible endpoint.
    monkeypatch.setenv("EXAI_MEMORY_URL", f"sqlite:///{memory_env / 'two.sqlite3'}")
    monkeypatch.setenv("EXAI_MEMORY_EMBEDDING_PROVIDERS", "openai_compat")
    monkeypatch.setenv("EXAI_MEMORY_OPENAI_EMBEDDING_BASE_URL", provider_emulator.base_url_kimi)
    assert main(["memory", "import", str(export)]) == 0
    assert main(["memory", "import", str(export)]) == 0
    assert _lines(capsys) == ["remembered 2", "already remembered 2"]
    assert main(["memory", "list", "--json"]) == 0
    imported = [json.loads(line) for line in _lines(capsys)]
    assert {(m["owner"], m["content"]) for m in imported} == {
        ("alice", "We chose SQLite"), ("bob", "Terse reviews")}  # fmt: skip
    assert {m["embedding_model"] for m in imported} == {"text-embedding-3-small"}

    monkeypatch.setenv("EXAI_MEMORY_OPENAI_EMBEDDING_MODEL", "other-model")
    assert main(["memory", "reembed"]) == 0
    assert _lines(capsys) == ["re-embedded 2 memories with other-model"]
    assert main(["memory", "reembed"]) == 0
    assert _lines(capsys) == ["re-embedded 0 memories with other-model"]

    assert main(["memory", "rm", imported[0]["id"]]) == 0
    assert main(["memory", "rm", imported[0]["id"]]) == 1
    assert "no memory" in capsys.readouterr().err
    assert main(["memory", "list"]) == 0
    assert len(_lines(capsys)) == 1


@pytest.mark.parametrize("backend", ["sqlite", "pg-vector"])
def test_a_bulk_import_embeds_and_stores_at_once(
    backend, memory_env, capsys, monkeypatch, provider_emulator, request
):
    if backend == "pg-vector":
        server = request.getfixturevalue("pgvector_server")
        name = f"bulk_{uuid.uuid4().hex[:12]}"
        monkeypatch.setenv("EXAI_MEMORY_URL", server.create_database(name))
    monkeypatch.setenv("EXAI_MEMORY_EMBEDDING_PROVIDERS", "openai_compat")
    monkeypatch.setenv("EXAI_MEMORY_OPENAI_EMBEDDING_BASE_URL", provider_emulator.base_url_kimi)
    export = memory_env / "export.jsonl"
    lines = [{"owner": "alice", "content": f"alice keeps note {i} on the blue board"}
             for i in range(70)]  # fmt: skip
    lines += [{"owner": "bob", "content": "bob reviews tersely", "type": "preference"}]
    export.write_text("".join(json.dumps(line) + "\n" for line in lines + lines[:3]))
    assert main(["memory", "import", "--bulk", str(export)]) == 0
    assert main(["memory", "import", "--bulk", str(export)]) == 0
    assert _lines(capsys) == ["remembered 71, already remembered 3",
                              "remembered 0, already remembered 74"]  # fmt: skip
    assert main(["memory", "list", "--owner", "bob", "--json"]) == 0
    (bob,) = [json.loads(line) for line in _lines(capsys)]
    assert (bob["type"], bob["source"], bob["embedding_model"]) == (
        "preference", "import", "text-embedding-3-small")  # fmt: skip
    assert main(["memory", "list", "--owner", "alice", "--limit", "1000"]) == 0
    assert len(_lines(capsys)) == 70
