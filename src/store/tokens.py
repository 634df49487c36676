"""Token estimates that never undercount, one estimator per model family.

exai cannot run Kimi's or GLM's tokenizer (neither ships with the SDKs), yet it
must know whether a message array fits a model's context window before sending
it. An overcount only drops an old turn that would have fitted; an undercount
makes the provider refuse the call. So every figure here is an upper bound,
reached by pricing each kind of character at the most it can cost:

* **Digits, punctuation, control characters** cost one token each. Byte-level
  BPE tokenizers (tiktoken, which Kimi uses; GLM's, likewise byte-level) have a
  token for every single byte, and merges only ever join bytes, so text of
  ASCII characters never needs more tokens than characters. Real tokenizers
  group digits in threes and merge common punctuation, so this overcounts.
* **ASCII letters and whitespace** cost ``1 / letters_per_token`` each: every
  word of English or code identifiers is at least three characters per token in
  these 150k-entry vocabularies (prose is nearer five). A long run of letters
  with hardly any whitespace (base64, hex, minified code) breaks into much
  shorter pieces, so such text is priced at ``blob_letters_per_token`` instead.
* **Non-ASCII characters** cost per UTF-8 length. A 4-byte character (emoji,
  rare CJK) can fall back to one token per byte, so it costs 4, and so does every
  3-byte character outside the CJK blocks (symbols, Indic and Thai scripts, the
  zero-width joiner inside emoji sequences) at 3. For Kimi and GLM, whose
  vocabularies were built for Chinese, a character of the CJK blocks (U+3000 to
  U+D7FF: CJK punctuation, kana, ideographs, hangul; and the full-width forms)
  costs one token, as do 2-byte letters (Cyrillic, Greek, accented Latin): the
  common characters are whole tokens there. That rests on the vocabulary; a text
  made mostly of rare ideographs outside it is the one case to price with the
  generic family. The generic family knows nothing about the vocabulary, so it
  prices every non-ASCII character at its byte length, the hard upper bound for
  any byte-level tokenizer.
* **Each message** adds the chat template's role markers (``per_message``) and
  each tool call its wrapper (``per_tool_call``); every request adds the reply
  primer (``per_request``).

Every character costs at least ``1 / MAX_CHARS_PER_TOKEN`` tokens under every
estimator. The stores rely on that: a stored turn whose size in characters
exceeds ``MAX_CHARS_PER_TOKEN`` times the budget cannot fit, so it is never
loaded (see :func:`message_chars`).

The counting uses only C-speed string operations (``isascii``, ``encode``,
``bytes.translate``, ``count``), because history assembly estimates every prior
message on each call and must stay within milliseconds for thousands of turns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "FAMILIES",
    "MAX_CHARS_PER_TOKEN",
    "TokenEstimator",
    "estimator_for",
    "family_of",
    "message_chars",
    "message_costs",
    "message_text",
]

MAX_CHARS_PER_TOKEN = 3.0
IMAGE_TOKENS = 2048  # a generous allowance for one image part of a vision message

_LOOSE = bytes(range(ord("a"), ord("z") + 1)) + bytes(range(ord("A"), ord("Z") + 1)) + b" \t\n\r"
_HIGH = bytes(range(0x80, 0x100))
_NOT_LEAD3 = bytes(b for b in range(256) if not 0xE0 <= b <= 0xEF)
# Lead bytes of U+3000..U+D7FF and U+F000..U+FFFF (CJK, kana, hangul, full-width forms).
_NOT_LEAD3_CJK = bytes(b for b in range(256) if not (0xE3 <= b <= 0xED or b == 0xEF))
_NOT_LEAD4 = bytes(b for b in range(256) if not 0xF0 <= b <= 0xF7)
_BLOB_MIN_LETTERS = 64
_BLOB_LETTERS_PER_SPACE = 16


@dataclass(frozen=True, slots=True)
class TokenEstimator:
    """Upper-bound token counts for one model family. See the module docstring."""

    family: str
    letters_per_token: float
    blob_letters_per_token: float
    two_byte: float
    cjk: float  # a 3-byte character of the CJK blocks
    three_byte: float = 3.0  # any other 3-byte character
    four_byte: float = 4.0
    per_message: int = 8
    per_tool_call: int = 16
    per_request: int = 16

    def __post_init__(self) -> None:
        if max(self.letters_per_token, self.blob_letters_per_token) > MAX_CHARS_PER_TOKEN:
            raise ValueError("an estimator may not price characters below 1/MAX_CHARS_PER_TOKEN")
        if min(self.two_byte, self.cjk, self.three_byte, self.four_byte) < 1:
            raise ValueError("a non-ASCII character costs at least one token")

    def text(self, text: str) -> int:
        """Tokens ``text`` can cost at most, without any message overhead."""
        if not text:
            return 0
        if text.isascii():
            data = text.encode("ascii")
            return self._ascii(data, len(data))
        data = text.encode("utf-8", "surrogatepass")
        ascii_part = data.translate(None, _HIGH)
        wide = len(text) - len(ascii_part)
        three = len(data.translate(None, _NOT_LEAD3))
        cjk = len(data.translate(None, _NOT_LEAD3_CJK))
        four = len(data.translate(None, _NOT_LEAD4))
        two = wide - three - four
        extra = (two * self.two_byte + cjk * self.cjk + (three - cjk) * self.three_byte
                 + four * self.four_byte)  # fmt: skip
        return self._ascii(ascii_part, len(ascii_part)) + math.ceil(extra)

    def _ascii(self, data: bytes, size: int) -> int:
        dense = len(data.translate(None, _LOOSE))
        loose = size - dense
        if not loose:
            return dense
        ratio = self.letters_per_token
        if loose >= _BLOB_MIN_LETTERS:
            spaces = data.count(b" ") + data.count(b"\n") + data.count(b"\t")
            if spaces * _BLOB_LETTERS_PER_SPACE < loose:
                ratio = self.blob_letters_per_token
        return dense + math.ceil(loose / ratio)

    def message(self, message: Mapping[str, Any], text: str | None = None) -> int:
        """Tokens one OpenAI-format message can cost, template overhead included
        (``text``: its :func:`message_text`, when the caller has it)."""
        tokens = self.per_message + self.text(message_text(message) if text is None else text)
        content = message.get("content")
        if isinstance(content, list):
            tokens += IMAGE_TOKENS * sum(
                1 for part in content if isinstance(part, Mapping) and part.get("type") != "text"
            )
        tool_calls = message.get("tool_calls")
        if tool_calls:
            tokens += self.per_tool_call * len(tool_calls)
        return tokens

    def messages(self, messages: Iterable[Mapping[str, Any]], tools: Sequence[Any] = ()) -> int:
        """Tokens a whole request can cost, reply primer included; the caller's function
        tools count as their JSON schema's text, which is about what vendors bill for them."""
        tokens = self.per_request + sum(self.message(m) for m in messages)
        if tools:
            tokens += self.text(json.dumps(list(tools), ensure_ascii=False, separators=(",", ":")))
        return tokens


def message_text(message: Mapping[str, Any]) -> str:
    """Every piece of text in ``message`` that the model reads, joined (the
    reasoning a tool-call message carries back to the vendor included).

    Image parts are priced by :meth:`TokenEstimator.message`, not by their URL.
    """
    pieces: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
    tool_calls = message.get("tool_calls")
    if tool_calls:
        pieces.append(json.dumps(tool_calls, ensure_ascii=False, separators=(",", ":")))
    for key in ("reasoning_content", "tool_call_id", "name"):
        value = message.get(key)
        if isinstance(value, str):
            pieces.append(value)
    return "\n".join(pieces) if len(pieces) > 1 else (pieces[0] if pieces else "")


def message_chars(message: Mapping[str, Any]) -> int:
    """Size of ``message`` in characters, as the stores record it per message.

    Every estimator prices a message at no less than
    ``message_chars / MAX_CHARS_PER_TOKEN`` tokens, so this is a lower bound of
    its cost that needs no estimator.
    """
    return len(message_text(message))


_KIMI = TokenEstimator("kimi", letters_per_token=3.0, blob_letters_per_token=1.5,
                       two_byte=1.0, cjk=1.0)  # fmt: skip
_GLM = TokenEstimator("glm", letters_per_token=3.0, blob_letters_per_token=1.5,
                      two_byte=1.0, cjk=1.0)  # fmt: skip
_GENERIC = TokenEstimator("generic", letters_per_token=2.5, blob_letters_per_token=1.25,
                          two_byte=2.0, cjk=3.0)  # fmt: skip
_FAMILIES = {"kimi": _KIMI, "glm": _GLM, "generic": _GENERIC}
FAMILIES: tuple[str, ...] = tuple(_FAMILIES)
# The family whose estimate each family's is, made once per distinct pricing: Kimi's
# and GLM's are alike.
_PRICED_AS = {
    family: next(f for f, e in _FAMILIES.items()
                 if replace(e, family="") == replace(estimator, family=""))
    for family, estimator in _FAMILIES.items()
}  # fmt: skip


def message_costs(message: Mapping[str, Any]) -> tuple[int, list[int]]:
    """``message``'s size in characters (:func:`message_chars`) and its tokens under
    each of :data:`FAMILIES`, in their order, its text read once: what a store
    records of every message it keeps."""
    text = message_text(message)
    made: dict[str, int] = {}
    for family in FAMILIES:
        same = _PRICED_AS[family]
        if same not in made:
            made[same] = _FAMILIES[same].message(message, text)
    return len(text), [made[_PRICED_AS[family]] for family in FAMILIES]


def family_of(model: str) -> str:
    """The tokenizer family of a model id: ``kimi``, ``glm`` or ``generic``."""
    name = model.lower()
    if name.startswith(("kimi", "moonshot")):
        return "kimi"
    if name.startswith(("glm", "chatglm", "codegeex")):
        return "glm"
    return "generic"


def estimator_for(family_or_model: str) -> TokenEstimator:
    """The estimator for a family name, or for the family a model id belongs to."""
    return _FAMILIES.get(family_or_model) or _FAMILIES[family_of(family_or_model)]
