"""Token estimates never undercount, checked on texts whose true count is bounded.

No tokenizer ships with the SDKs, so each text here is one whose token count has a
ceiling that follows from how byte-level BPE works, whatever the vocabulary:
every single byte is a token and merges only join bytes, so a text never needs
more tokens than its UTF-8 bytes; and a word or character that the vocabulary
holds whole costs at most one token.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exai.store.tokens import (
    MAX_CHARS_PER_TOKEN,
    estimator_for,
    family_of,
    message_chars,
)

FAMILIES = ["kimi", "glm", "generic"]
LETTERS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ \t\n\r")


@pytest.mark.parametrize("family", FAMILIES)
def test_digits_and_punctuation_cost_at_most_one_token_per_character(family: str) -> None:
    # ASCII characters are one byte each: at worst one token per character.
    for text in ("3.14159,2.71828;1.41421", "{[(<>)]}!?@#$%^&*", "1,2,3,4,5,6,7,8,9,0" * 40):
        assert estimator_for(family).text(text) >= len(text)


@pytest.mark.parametrize("family", FAMILIES)
def test_emoji_and_rare_characters_cost_at_most_their_bytes(family: str) -> None:
    # Four-byte characters may fall back to one token per byte.
    for text in ("😀🚀🎉" * 50, "𠀀𠀁𠀂𪚥", "🇺🇳👩‍👩‍👧‍👦"):
        assert estimator_for(family).text(text) >= len(text.encode("utf-8"))


@pytest.mark.parametrize("family", ["kimi", "glm"])
def test_common_cjk_costs_at_least_one_token_per_character(family: str) -> None:
    # The most frequent Chinese characters, kana and hangul are whole tokens in
    # Kimi's and GLM's vocabularies: at most one token per character.
    for text in ("的一是不了人我在有他这为之大来以个中上们" * 20, "こんにちは世界", "안녕하세요"):
        assert estimator_for(family).text(text) >= len(text)


def test_generic_prices_non_ascii_at_its_byte_length() -> None:
    # Knowing nothing of the vocabulary, only the byte bound is safe.
    for text in ("的一是不了人我在有他", "Привет, мир", "ελληνικά", "naïve café"):
        non_letters = "".join(c for c in text if c not in LETTERS)
        assert estimator_for("generic").text(text) >= len(non_letters.encode("utf-8"))


@pytest.mark.parametrize("family", FAMILIES)
def test_single_token_words_cost_at_most_one_token_each(family: str) -> None:
    # " the", " and", " of" are single tokens in every BPE vocabulary of this size.
    text = " the and of to in" * 200
    assert estimator_for(family).text(text) >= len(text.split())


@pytest.mark.parametrize("family", FAMILIES)
def test_letter_blobs_are_priced_as_short_pieces(family: str) -> None:
    blob = "QmFzZTY0IGVuY29kZWQgZGF0YSBsb29rcyBsaWtlIHRoaXM" * 20  # no spaces at all
    prose = "the quick brown fox jumps over the lazy dog " * 20
    estimator = estimator_for(family)
    assert estimator.text(blob) / len(blob) > 1.5 * estimator.text(prose) / len(prose)
    assert estimator.text(blob) >= len(blob) / 1.5


@pytest.mark.parametrize("family", FAMILIES)
def test_messages_carry_template_overhead(family: str) -> None:
    estimator = estimator_for(family)
    assert estimator.message({"role": "user", "content": ""}) > 0
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    assert estimator.message(call) > estimator.message({"role": "assistant", "content": ""})
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    assert estimator.message(image) >= 1000
    assert estimator.messages([]) > 0


@given(st.text(max_size=400))
def test_every_character_costs_at_least_the_floor_the_stores_rely_on(text: str) -> None:
    message = {"role": "user", "content": text}
    for family in FAMILIES:
        estimator = estimator_for(family)
        assert estimator.text(text) * MAX_CHARS_PER_TOKEN >= len(text)
        assert estimator.message(message) * MAX_CHARS_PER_TOKEN >= message_chars(message)


@given(st.text(alphabet=st.characters(blacklist_characters=sorted(LETTERS)), max_size=300))
def test_generic_never_undercounts_text_without_letters(text: str) -> None:
    assert estimator_for("generic").text(text) >= len(text.encode("utf-8", "surrogatepass"))


def test_model_ids_map_to_families() -> None:
    assert family_of("kimi-k2.6") == "kimi"
    assert family_of("moonshot-v1-128k") == "kimi"
    assert family_of("glm-4.6") == "glm"
    assert family_of("llama3.1:8b") == "generic"
    assert estimator_for("glm-4.5-air").family == "glm"
