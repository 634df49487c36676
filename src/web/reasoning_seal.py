"""The reasoning a model face hands its client to bring back, sealed.

Agents keep no reasoning of their own: Claude Code brings a thinking block's
``signature`` back with the history, Codex a reasoning item's
``encrypted_content``. exai puts the model's reasoning in those carriers so that a
tool round reaches the vendor again with it (Moonshot refuses a thinking tool
round without it). A carrier the client could read or write would let it put
words in the model's mouth (what exai sends the vendor as the model's own
reasoning) and would show the reasoning to a client that asked for it to be
omitted. So a carrier is sealed with authenticated encryption (AES-256-GCM):

- the key is ``EXAI_REASONING_SEAL_KEY``, which every daemon of a deployment
  shares (so a carrier made by one is opened by another behind the same load
  balancer); without it, a random key kept in the data directory
  (``reasoning-seal.key``, readable by its owner only), which one daemon keeps
  across restarts;
- the principal it was made for is bound in as associated data, so alice's
  carrier replayed by bob does not open;
- it carries the time it was made and opens for :data:`MAX_AGE_S`, so an old
  carrier (a key rotated, a transcript replayed weeks later) does not.

A carrier that does not open is not sent: the face leaves it out and says why in
a note. Pure apart from :func:`load_seal`, which reads or makes the key file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["MAX_AGE_S", "PREFIX", "Carriers", "Opened", "ReasoningSeal", "face_seal", "load_seal"]

PREFIX = "exai.r2."
_OLD_PREFIX = "exai.r1."  # the unsealed carriers of earlier releases
MAX_AGE_S = 30 * 24 * 3600.0
_NONCE = 12
_STAMP = 8
_KEY_FILE = "reasoning-seal.key"


@dataclass(frozen=True, slots=True)
class Opened:
    """What a carrier held: the reasoning, or why there is none to send."""

    text: str = ""
    why: str = ""  # set when a carrier was there and did not open


class ReasoningSeal:
    """Seals and opens reasoning carriers with one key."""

    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        self._aead = AESGCM(hashlib.sha256(b"exai-reasoning-seal\0" + key).digest())
        self._clock = clock

    def seal(self, reasoning: str, principal: str) -> str:
        nonce = secrets.token_bytes(_NONCE)
        stamp = int(self._clock()).to_bytes(_STAMP, "big")
        sealed = self._aead.encrypt(nonce, stamp + reasoning.encode(), _bound(principal))
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    def open(self, carrier: object, principal: str) -> Opened:
        if not isinstance(carrier, str) or not carrier:
            return Opened()
        if carrier.startswith(_OLD_PREFIX):
            return Opened(why="it was made by an earlier exai, whose carriers are not sealed")
        if not carrier.startswith(PREFIX):
            return Opened(why="it was not made by exai")
        encoded = carrier[len(PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            plain = self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _bound(principal))
        except (binascii.Error, ValueError, InvalidTag):
            return Opened(why="it does not verify: altered, made for another principal, or "
                              "sealed with another deployment's key")  # fmt: skip
        made = int.from_bytes(plain[:_STAMP], "big")
        if self._clock() - made > MAX_AGE_S:
            return Opened(why=f"it is older than {MAX_AGE_S / 86400:g} days")
        try:
            return Opened(text=plain[_STAMP:].decode())
        except UnicodeDecodeError:  # pragma: no cover - only exai seals, and it seals text
            return Opened(why="it does not hold text")

    def for_principal(self, principal: str) -> Carriers:
        return Carriers(self, principal)


@dataclass(frozen=True, slots=True)
class Carriers:
    """The seal as one principal's request uses it."""

    seal_with: ReasoningSeal
    principal: str

    def seal(self, reasoning: str) -> str:
        return self.seal_with.seal(reasoning, self.principal)

    def open(self, carrier: object) -> Opened:
        return self.seal_with.open(carrier, self.principal)


def _bound(principal: str) -> bytes:
    return b"exai-reasoning\0" + principal.encode()


def face_seal(settings: Any) -> ReasoningSeal:
    """The seal the faces of a daemon with these settings use."""
    key = settings.reasoning_seal_key
    return load_seal(key.get_secret_value() if key is not None else None, settings.data_dir)


def load_seal(configured: str | None, data_dir: Path) -> ReasoningSeal:
    """The deployment's seal: ``EXAI_REASONING_SEAL_KEY`` when set, else this daemon's
    own key file in ``data_dir``, made on first use."""
    if configured:
        return ReasoningSeal(configured.encode())
    path = Path(data_dir) / _KEY_FILE
    try:
        return ReasoningSeal(path.read_bytes())
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole under another name and linked into place, so a daemon starting
    # beside this one on the same directory reads a whole key or makes none.
    temporary = path.with_name(f".{_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(32))
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass  # another daemon made it first: its key is the one
    finally:
        temporary.unlink()
    return ReasoningSeal(path.read_bytes())
