"""Documents and images through ``chat``: a real daemon, the real ``openai`` SDK
(Kimi's plugin) and ``zai-sdk`` (GLM's), against the provider emulator, whose
files API extracts a PDF's text by its fixed rule (see exai.emulators.files)."""

from __future__ import annotations

import hashlib
import itertools
import json
import struct
import zlib
from pathlib import Path

import pytest

from exai.emulators.files import minimal_pdf
from exai.protocol import ErrorCode
from exai.providers.catalogue import load_catalogue
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.tools.workflow_helpers import step

KIMI = "kimi-k2.6"
REPORT_LINE = "Quarterly revenue rose 12 percent"


def _png(width: int = 2, height: int = 2) -> bytes:
    """A valid, tiny RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))  # fmt: skip


def _vision_kimi_model() -> str:
    """A Kimi model the catalogue says reads images, whichever it currently lists."""
    for info in load_catalogue():
        if info.provider == "kimi" and info.images:
            return info.name
    pytest.skip("the catalogue lists no Kimi vision model")


@pytest.fixture
def settings(tmp_path, emulator):
    def build(**overrides):
        return make_settings(tmp_path, **{**emulated_providers(emulator), **overrides})

    return build


@pytest.fixture
def pdf(tmp_path: Path) -> Path:
    path = tmp_path / "report.pdf"
    path.write_bytes(minimal_pdf(REPORT_LINE, "Costs (fixed) stayed flat"))
    return path


def _system_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"]
            if m["role"] == "system" and isinstance(m["content"], str)]  # fmt: skip


async def test_a_pdf_reaches_a_kimi_model(settings, emulator, client_factory, pdf):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": "summarise the report", "model": KIMI,
                                         "files": [str(pdf)]})  # fmt: skip
    assert res.error is None, res.error
    meta = res.metadata.model_dump()
    [attached] = meta["files_attached"]
    assert attached["path"] == str(pdf) and attached["kind"] == "document"
    assert attached["uploaded"] is True and attached["file_id"] == "emu-file-1"
    assert "files_skipped" not in meta
    [upload] = emulator.uploads
    assert upload["purpose"] == "file-extract" and upload["filename"] == "report.pdf"
    # The extracted text reached the model as Moonshot documents it: a system
    # message holding the JSON its /files/{id}/content answered, before the prompt.
    request = emulator.requests_for("kimi")[-1]
    messages = request["body"]["messages"]
    extracted = json.loads(messages[-2]["content"])
    assert messages[-2]["role"] == "system" and messages[-1]["role"] == "user"
    assert extracted["content"] == f"{REPORT_LINE} Costs (fixed) stayed flat"
    assert extracted["filename"] == "report.pdf"
    # Nothing is left at the vendor: the text is what the chat carries.
    assert emulator.state.files.listing() == []


async def test_the_same_file_is_uploaded_once_and_replayed_unchanged(
    settings, emulator, client_factory, pdf
):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "read it", "model": KIMI,
                                           "files": [str(pdf)]})  # fmt: skip
        cid = first.metadata.continuation_id
        again = {"prompt": "and again", "model": KIMI, "continuation_id": cid, "files": [str(pdf)]}
        second = await client.call("chat", again)
        third = await client.call("chat", {"prompt": "no files now", "model": KIMI,
                                           "continuation_id": cid})  # fmt: skip
        elsewhere = await client.call("chat", {"prompt": "new thread", "model": KIMI,
                                               "files": [str(pdf)]})  # fmt: skip
    for res in (first, second, third, elsewhere):
        assert res.error is None, res.error
    assert len(emulator.uploads) == 1
    assert second.metadata.model_dump()["files_attached"][0]["uploaded"] is False
    assert elsewhere.metadata.model_dump()["files_attached"][0]["uploaded"] is False
    sent = [r["body"]["messages"] for r in emulator.requests_for("kimi")]
    # Each later turn starts with the bytes the earlier one sent, then its answer.
    for earlier, later in itertools.pairwise(sent[:3]):
        prefix = json.dumps(earlier, ensure_ascii=False)
        assert json.dumps(later[: len(earlier)], ensure_ascii=False) == prefix
    assert sum(REPORT_LINE in text for text in _system_texts(emulator.requests_for("kimi")[2])) == 2


async def test_uploads_are_not_shared_between_principals(settings, emulator, client_factory, pdf):
    async with running_daemon(settings(ws_tokens="alice=ta,bob=tb")) as daemon:
        alice = await client_factory(daemon, "ta")
        bob = await client_factory(daemon, "tb")
        for client in (alice, bob, alice):
            res = await client.call("chat", {"prompt": "read", "model": KIMI,
                                             "files": [str(pdf)]})  # fmt: skip
            assert res.error is None, res.error
    assert len(emulator.uploads) == 2  # one each; Alice's second use came from her cache


async def test_an_image_reaches_a_vision_model(settings, emulator, client_factory, tmp_path):
    model = _vision_kimi_model()
    image = tmp_path / "chart.png"
    image.write_bytes(_png())
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "describe the chart", "model": model,
                                           "files": [str(image)]})  # fmt: skip
        assert first.error is None, first.error
        cid = first.metadata.continuation_id
        second = await client.call(
            "chat", {"prompt": "and its colours?", "model": model, "continuation_id": cid}
        )
        assert second.error is None, second.error
    assert emulator.uploads == []  # images go inline, never through the files API
    digest = hashlib.sha256(image.read_bytes()).hexdigest()
    first_req, second_req = emulator.requests_for("kimi")[-2:]
    size = len(image.read_bytes())
    assert first_req["images"] == [
        {"role": "user", "mime": "image/png", "bytes": size, "sha256": digest}
    ]
    user = first_req["body"]["messages"][-1]
    assert user["content"][0] == {"type": "text", "text": "describe the chart"}
    # The stored turn replays the same image part on the next turn.
    assert second_req["images"] == first_req["images"]
    assert (
        second_req["body"]["messages"][: len(first_req["body"]["messages"])]
        == (first_req["body"]["messages"])
    )


async def test_files_a_model_cannot_read_are_skipped_with_the_reason(
    settings, emulator, client_factory, pdf, tmp_path
):
    image = tmp_path / "photo.png"
    image.write_bytes(_png())
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": "what do they say?", "model": "glm-4.6",
                                         "files": [str(pdf), str(image)]})  # fmt: skip
    assert res.error is None, res.error
    skipped = {s["path"]: s["reason"] for s in res.metadata.model_dump()["files_skipped"]}
    assert "cannot read application/pdf files" in skipped[str(pdf)]
    assert "cannot read images" in skipped[str(image)]
    assert emulator.uploads == []
    request = emulator.requests_for("glm")[-1]
    assert request["images"] == []
    assert not any(REPORT_LINE in json.dumps(m) for m in request["body"]["messages"])


async def test_a_file_over_the_upload_cap_is_skipped(settings, emulator, client_factory, pdf):
    async with running_daemon(settings(max_upload_bytes=200)) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": "read", "model": KIMI, "files": [str(pdf)]})
    assert res.error is None, res.error
    [skipped] = res.metadata.model_dump()["files_skipped"]
    assert skipped["path"] == str(pdf) and skipped["reason"].startswith("too large")
    assert emulator.uploads == []


async def test_a_pdf_outside_the_roots_is_refused(
    settings, emulator, client_factory, tmp_path_factory
):
    outside = tmp_path_factory.mktemp("elsewhere") / "secret.pdf"
    outside.write_bytes(minimal_pdf("not yours"))
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("chat", {"prompt": "read", "model": KIMI,
                                         "files": [str(outside)]})  # fmt: skip
    assert res.error is not None and res.error.code == ErrorCode.FORBIDDEN
    assert emulator.uploads == [] and emulator.requests_for("kimi") == []


async def test_a_workflow_tool_sends_a_pdf_among_its_relevant_files(
    settings, emulator, client_factory, pdf
):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("codereview", step(
            1, 1, final=True, confidence="high", model=KIMI,
            files_checked=[str(pdf)], relevant_files=[str(pdf)],
        ))  # fmt: skip
    assert res.error is None, res.error
    assert [a["path"] for a in res.metadata.model_dump()["files_attached"]] == [str(pdf)]
    assert len(emulator.uploads) == 1
    assert any(REPORT_LINE in text for text in _system_texts(emulator.requests_for("kimi")[-1]))


async def test_a_retried_turn_with_a_document_is_answered_from_the_store(
    settings, emulator, client_factory, pdf
):
    arguments = {"prompt": "read it", "model": KIMI, "files": [str(pdf)]}
    config = settings()
    async with running_daemon(config) as daemon:
        client = await client_factory(daemon)
        answered = await client.call("chat", arguments, request_id="r-1")
        session = client.session_id
        await client.close()
    requests_before = len(emulator.requests)
    async with running_daemon(config) as daemon:  # the replay cache is gone; the store is not
        client = await client_factory(daemon, session_id=session)
        again = await client.call("chat", arguments, request_id="r-1")
    assert again.error is None, again.error
    assert again.metadata.replayed and again.outputs == answered.outputs
    assert len(emulator.requests) == requests_before and len(emulator.uploads) == 1
