"""Reading files safely beneath their root, and formatting them as line-numbered blocks."""

from __future__ import annotations

import asyncio
import codecs
import errno
import os
import stat
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from exai.errors import ExaiError, ForbiddenError, ValidationError_
from exai.files.policy import (
    PathArg,
    _as_list,
    _hard_links,
    _locate,
    _locate_named,
    _Located,
    _os_reason,
    _prepare_roots,
    check_paths,
)
from exai.files.walk import DEFAULT_MAX_FILES, expand_paths

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "FileBundle",
    "acheck_paths",
    "aread_file_text",
    "aread_files",
    "format_block",
    "read_file_text",
    "read_files",
]

DEFAULT_MAX_FILE_BYTES = 1_000_000
SNIFF_BYTES = 8192
LINE_MARK = "\u2502"  # "│": between the line number and the line

# UTF-32 first: its little-endian mark starts with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in must not hang the open
_OPEN_BENEATH = bool(_O_NOFOLLOW and _O_DIRECTORY) and os.open in os.supports_dir_fd
_CASE_INSENSITIVE = sys.platform in ("darwin", "win32")


@dataclass
class FileBundle:
    """File contents ready for a prompt, and an account of everything left out."""

    blocks: list[str] = field(default_factory=list)  # one line-numbered block per file
    included: list[str] = field(default_factory=list)  # resolved paths, in block order
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    tokens: int = 0  # estimated tokens of all blocks

    @property
    def text(self) -> str:
        return "\n\n".join(self.blocks)

    def skipped_note(self) -> str:
        """One line per file left out, for the model and the agent; "" when none was."""
        if not self.skipped:
            return ""
        return "Files not included:\n" + "\n".join(f"- {p}: {r}" for p, r in self.skipped)


# --- reading -----------------------------------------------------------------


class _Skip(Exception):
    """A file that is allowed but not sent (binary, too large); carries the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_files(
    paths: Iterable[PathArg] | PathArg,
    roots: Iterable[str],
    budget_tokens: int,
    estimate: Callable[[str], int],
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_files: int = DEFAULT_MAX_FILES,
) -> FileBundle:
    """Read files and directories into line-numbered blocks within a token budget.

    Bad paths named by the caller raise (see :func:`expand_paths`). Files that cannot
    or should not be sent are listed in ``skipped``: binary, too large, over the token
    budget (a later, smaller file may still fit), or changed since the check.
    ``estimate`` is called on each block from the calling thread.
    """
    roots = list(roots)
    files, skipped = expand_paths(paths, roots, max_files=max_files)
    prepared = _prepare_roots(roots)
    bundle = FileBundle(skipped=list(skipped))
    remaining = budget_tokens
    for real in files:
        shown = str(real)
        if remaining <= 0:
            bundle.skipped.append((shown, "over token budget (budget used up)"))
            continue
        try:
            # Checked again right before opening: the tree may have changed since.
            text = _load_text(_locate(shown, prepared, roots), max_file_bytes)
        except _Skip as skip:
            bundle.skipped.append((shown, skip.reason))
            continue
        except ExaiError as exc:
            bundle.skipped.append((shown, (exc.details or {}).get("reason", exc.message)))
            continue
        block = format_block(shown, text)
        cost = estimate(block)
        if cost > remaining:
            bundle.skipped.append((shown, f"over token budget (~{cost} tokens, {remaining} left)"))
            continue
        bundle.blocks.append(block)
        bundle.included.append(shown)
        bundle.tokens += cost
        remaining -= cost
    return bundle


def read_file_text(
    path: PathArg, roots: Iterable[str], max_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> str:
    """The decoded text of one file (line ends untouched); raises if it cannot be sent."""
    roots = list(roots)
    located = _locate_named(path, _prepare_roots(roots), roots)
    shown = os.fspath(path)
    if stat.S_ISDIR(located.st.st_mode):
        raise ValidationError_(
            f"{shown!r} is a directory, not a file",
            details={"path": shown, "reason": "is a directory"},
        )
    try:
        return _load_text(located, max_bytes)
    except _Skip as skip:
        raise ValidationError_(
            f"{shown!r} cannot be read as text: {skip.reason}",
            details={"path": shown, "reason": skip.reason},
        ) from None


def format_block(path: str, text: str) -> str:
    """``text`` as a block whose lines carry their numbers, so a model can cite them.

    Every content line starts with its number and a bar, so a line in the file that
    looks like a block marker cannot be mistaken for one.
    """
    shown = path if path.isprintable() else repr(path)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        return f"--- BEGIN FILE: {shown} (empty) ---\n--- END FILE ---"
    width = max(4, len(str(len(lines))))
    body = "\n".join(
        f"{n:>{width}}{LINE_MARK} {line}" if line else f"{n:>{width}}{LINE_MARK}"
        for n, line in enumerate(lines, 1)
    )
    return f"--- BEGIN FILE: {shown} (lines 1-{len(lines)}) ---\n{body}\n--- END FILE ---"


def _load_text(located: _Located, max_bytes: int) -> str:
    fd = _open_beneath(located.real, located.root)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            head = f.read(SNIFF_BYTES)
            binary = _bom_encoding(head) is None and b"\0" in head
            raise _Skip("binary" if binary else f"too large ({size} bytes > {max_bytes} cap)")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _Skip(f"too large (over {max_bytes} bytes cap)")
    return _decode(data)


def _bom_encoding(data: bytes) -> str | None:
    return next((enc for bom, enc in _BOMS if data.startswith(bom)), None)


def _decode(data: bytes) -> str:
    encoding = _bom_encoding(data)
    if encoding is None and b"\0" in data[:SNIFF_BYTES]:
        raise _Skip("binary")
    try:
        return data.decode(encoding or "utf-8")
    except UnicodeDecodeError:
        raise _Skip(f"binary (not valid {encoding or 'utf-8'})") from None


def _open_beneath(real: Path, root: Path) -> int:
    """Open the regular file ``real`` (resolved, inside ``root``) for reading.

    Each component below the root is opened relative to its parent with O_NOFOLLOW.
    ``real`` has no symlinks in it, so finding one means the tree changed after the
    check; the open then fails instead of following the link, possibly out of the root.
    """
    try:
        if not _OPEN_BENEATH:
            fd = _open_and_compare(real)
        elif real == root:
            fd = os.open(real, _O_READ | _O_NOFOLLOW | _O_NONBLOCK)
        else:
            parts = real.relative_to(root).parts
            dir_fd = os.open(root, _O_READ | _O_DIRECTORY)
            try:
                for part in parts[:-1]:
                    next_fd = os.open(part, _O_READ | _O_DIRECTORY | _O_NOFOLLOW, dir_fd=dir_fd)
                    os.close(dir_fd)
                    dir_fd = next_fd
                fd = os.open(parts[-1], _O_READ | _O_NOFOLLOW | _O_NONBLOCK, dir_fd=dir_fd)
            finally:
                os.close(dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
            raise ForbiddenError(
                f"{str(real)!r} changed while being opened (a symlink appeared); refused",
                details={"path": str(real), "reason": "refused: changed while being opened"},
            ) from None
        raise _Skip(_os_reason(exc)) from None
    # Checked on the descriptor that will be read, so nothing can change in between.
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _Skip("not a regular file")
    links = _hard_links(st)
    if links is not None:
        os.close(fd)
        raise ForbiddenError(
            f"{str(real)!r} is refused: it is {links}, and another of its names may be "
            "outside the allowed roots",
            details={"path": str(real), "reason": f"refused: {links}"},
        )
    return fd


def _open_and_compare(real: Path) -> int:
    # Platforms without openat/O_NOFOLLOW (Windows): open, then make sure the path
    # still resolves to itself and names the very file that was opened.
    fd = os.open(real, _O_READ)
    try:
        if os.path.realpath(real) != str(real) or not os.path.samestat(os.fstat(fd), os.stat(real)):
            raise OSError(errno.ELOOP, "changed while being opened")
    except BaseException:
        os.close(fd)
        raise
    return fd


# --- async wrappers ----------------------------------------------------------


async def acheck_paths(paths: Iterable[PathArg] | PathArg, roots: Iterable[str]) -> list[Path]:
    """:func:`check_paths` on a worker thread."""
    return await asyncio.to_thread(check_paths, _as_list(paths), list(roots))


async def aread_files(
    paths: Iterable[PathArg] | PathArg,
    roots: Iterable[str],
    budget_tokens: int,
    estimate: Callable[[str], int],
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_files: int = DEFAULT_MAX_FILES,
) -> FileBundle:
    """:func:`read_files` on a worker thread (``estimate`` runs there too)."""
    return await asyncio.to_thread(
        read_files,
        _as_list(paths),
        list(roots),
        budget_tokens,
        estimate,
        max_file_bytes=max_file_bytes,
        max_files=max_files,
    )


async def aread_file_text(
    path: PathArg, roots: Iterable[str], max_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> str:
    """:func:`read_file_text` on a worker thread."""
    return await asyncio.to_thread(read_file_text, path, list(roots), max_bytes)
