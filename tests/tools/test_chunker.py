"""StreamChunker: boundaries, sizes, and code fences kept whole."""

from __future__ import annotations

import random

from exai.tools.chunker import StreamChunker


def _stream(text: str, chunker: StreamChunker, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    i = 0
    while i < len(text):
        n = rng.randint(1, 7)  # token-sized deltas
        out += chunker.feed(text[i : i + n])
        i += n
    return out + chunker.flush()


def test_nothing_lost_or_reordered():
    text = "".join(f"Sentence number {i} is here. " for i in range(300))
    chunks = _stream(text, StreamChunker(50, 400))
    assert "".join(chunks) == text


def test_cuts_at_sentence_ends_within_bounds():
    text = "".join(f"Sentence number {i} is here. " for i in range(300))
    chunks = _stream(text, StreamChunker(50, 400))
    for chunk in chunks[:-1]:
        assert 50 <= len(chunk) <= 400
        assert chunk.endswith(". ")


def test_prefers_paragraph_breaks():
    para = "Words in a paragraph. " * 5
    text = "\n\n".join([para] * 10)
    chunks = _stream(text, StreamChunker(60, 1000))
    assert all(c.endswith("\n\n") for c in chunks[:-1])


def test_never_cuts_inside_a_code_fence():
    code = "```python\n" + "".join(f"x_{i} = {i}  # line. Of code.\n" for i in range(80)) + "```\n"
    text = "Intro sentence here. " * 5 + "\n\n" + code + "\nAfter the code. " * 5
    chunks = _stream(text, StreamChunker(40, 200))
    assert "".join(chunks) == text
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0, chunk
    assert any(len(c) > 200 for c in chunks)  # the fence came out whole, past max


def test_long_text_without_boundaries_is_cut_at_max():
    text = "word " * 1000
    chunks = _stream(text, StreamChunker(10, 100))
    assert "".join(chunks) == text
    assert all(len(c) <= 100 for c in chunks)


def test_small_output_is_one_chunk():
    assert _stream("Short answer.", StreamChunker(200, 2000)) == ["Short answer."]


def test_cjk_sentences():
    text = "这是第一个句子。" * 100
    chunks = _stream(text, StreamChunker(20, 125))
    assert "".join(chunks) == text
    assert all(c.endswith("。") or c is chunks[-1] for c in chunks)
