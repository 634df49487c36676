"""Documents and images are read under the same file policy as text files."""

from __future__ import annotations

import os

import pytest

from exai.emulators.files import extract_text, minimal_pdf
from exai.errors import ForbiddenError, ValidationError_
from exai.files.binary import read_file_bytes, sniff_kind


@pytest.mark.parametrize(
    ("head", "name", "expected"),
    [
        (b"%PDF-1.7\n", "x.bin", ("document", "application/pdf")),  # bytes decide, not names
        (b"\x89PNG\r\n\x1a\n....", "photo", ("image", "image/png")),
        (b"\xff\xd8\xff\xe0", "a.jpg", ("image", "image/jpeg")),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "a.webp", ("image", "image/webp")),
        (b"PK\x03\x04rest", "notes.docx", ("document", "application/x-docx")),
        (b"PK\x03\x04rest", "archive.zip", None),  # a plain ZIP is nobody's document
        (b"just text", "report.pdf", None),  # a name alone does not make a PDF
    ],
)
def test_kinds_are_told_by_their_first_bytes(head, name, expected):
    assert sniff_kind(head, name) == expected


def test_a_pdf_inside_the_roots_is_read(tmp_path):
    pdf = tmp_path / "a.pdf"
    pdf.write_bytes(minimal_pdf("hello (world)"))
    found = read_file_bytes(str(pdf), [str(tmp_path)], 1_000_000)
    assert found is not None and found.kind == "document" and found.data == pdf.read_bytes()
    assert extract_text(found.data) == "hello (world)"
    text = tmp_path / "a.txt"
    text.write_text("plain")
    assert read_file_bytes(str(text), [str(tmp_path)], 1_000_000) is None  # left to the text reader


def test_a_pdf_outside_the_roots_or_behind_a_symlink_is_refused(tmp_path_factory):
    root = tmp_path_factory.mktemp("root")
    outside = tmp_path_factory.mktemp("outside") / "secret.pdf"
    outside.write_bytes(minimal_pdf("secret"))
    with pytest.raises(ForbiddenError):
        read_file_bytes(str(outside), [str(root)], 1_000_000)
    link = root / "innocent.pdf"
    link.symlink_to(outside)
    with pytest.raises(ForbiddenError):
        read_file_bytes(str(link), [str(root)], 1_000_000)
    hard = root / "hard.pdf"
    os.link(outside, hard)  # a second name for a file elsewhere
    with pytest.raises(ForbiddenError):
        read_file_bytes(str(hard), [str(root)], 1_000_000)


def test_a_document_over_the_cap_is_refused_with_the_reason(tmp_path):
    pdf = tmp_path / "big.pdf"
    pdf.write_bytes(minimal_pdf("x" * 500))
    with pytest.raises(ValidationError_) as caught:
        read_file_bytes(str(pdf), [str(tmp_path)], 100)
    assert caught.value.details["reason"].startswith("too large")
