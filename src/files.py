"""Safe file access: the one place where a path from a client becomes file contents.

A tool that takes files sends their contents to a third-party model, so every path
a client gives is untrusted input. The policy, enforced here and nowhere else:

* Paths must be absolute: the daemon does not share the client's working directory,
  so a relative path would silently mean something else.
* After every symlink is resolved the path must lie inside one of the allowed roots
  (``EXAI_ALLOWED_ROOTS``), and never in a system directory or a credential store,
  even when a root contains one (a root of ``/`` still cannot read ``/etc``).
* A path the caller named that breaks the policy raises :class:`ForbiddenError` or
  :class:`ValidationError_` before anything is opened, so the caller gets a clear error.
  Entries found while expanding a directory are skipped with a reason instead, so one
  stray symlink does not make a whole project unreadable.
* Files are opened beneath their root one component at a time with ``O_NOFOLLOW``:
  a directory or file swapped for a symlink after the check makes the open fail
  instead of following it out of the root. Nothing outside the roots is ever opened.
* Directories expand in a stable sorted order with the usual exclusions; whatever is
  not included (excluded, binary, too large, over the token budget) is listed with a
  reason, never dropped silently.

Text detection: a file is text if it starts with a UTF-8/16/32 byte-order mark and
decodes accordingly, or has no NUL byte in its first 8 KiB and decodes as strict
UTF-8. Anything else is skipped as binary: replacement characters would hand the
model a corrupted file without anyone noticing. Line ends follow Python's universal
newlines (``\\r\\n``, ``\\r``, ``\\n``), which is also how editors number lines.

Everything here blocks; async callers use the ``a*`` wrappers, which run on a worker
thread so the event loop is never held up by a slow disk.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from exai.errors import ExaiError, ForbiddenError, ValidationError_

__all__ = [
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_FILE_BYTES",
    "EXCLUDED_DIRS",
    "FileBundle",
    "acheck_paths",
    "aread_file_text",
    "aread_files",
    "check_paths",
    "expand_paths",
    "format_block",
    "read_file_text",
    "read_files",
    "resolve_path",
]

PathArg = str | os.PathLike[str]

DEFAULT_MAX_FILE_BYTES = 1_000_000
DEFAULT_MAX_FILES = 1000
SNIFF_BYTES = 8192
LINE_MARK = "\u2502"  # "│": between the line number and the line

# Refused whatever the roots say. Their resolved forms are refused too (/etc is
# /private/etc on macOS).
SYSTEM_DIRS = (
    "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/var/lock",
    "/lost+found", "/private/etc", "/private/var/run", "/System", "/Library/Keychains",
)  # fmt: skip
# Credential stores refused wherever they appear, under any user's home.
CREDENTIAL_DIR_NAMES = frozenset({".ssh", ".gnupg", ".aws", ".azure", ".kube", ".password-store"})
CREDENTIAL_FILE_NAMES = frozenset({".netrc", "_netrc", ".git-credentials", ".pgpass"})
# Credential stores refused under the daemon user's home and /root.
HOME_CREDENTIALS = (
    ".docker", ".config/gcloud", ".config/gh", ".config/hub", ".config/op",
    ".local/share/keyrings", "Library/Keychains", ".npmrc", ".pypirc", ".cargo/credentials",
    ".cargo/credentials.toml", ".gem/credentials", ".terraform.d", ".vault-token",
)  # fmt: skip

# Not descended into while expanding a directory (a directory named explicitly is
# still expanded). Any directory holding a pyvenv.cfg is a virtual environment and
# excluded as well, whatever its name.
EXCLUDED_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", "node_modules", "bower_components", ".venv", "venv",
    "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".tox",
    ".nox", ".eggs", "dist", "build", "target", ".next", ".nuxt", ".svelte-kit", ".turbo",
    ".parcel-cache", ".gradle", ".terraform", ".idea", ".vscode", ".cache", "htmlcov",
})  # fmt: skip
_GENERATED_FILES = frozenset({
    ".DS_Store", "Thumbs.db", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock",
    "uv.lock", "Cargo.lock", "Pipfile.lock", "composer.lock", "Gemfile.lock", "go.sum",
})  # fmt: skip
_GENERATED_SUFFIXES = (".min.js", ".min.css", ".map")
_SECRET_NAMES = frozenset({"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "credentials.json"})
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore")
_ENV_TEMPLATES = (".example", ".sample", ".template", ".dist")

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


# --- checking a path ---------------------------------------------------------


class _Located(NamedTuple):
    real: Path  # symlinks resolved
    root: Path  # the resolved allowed root that contains it
    st: os.stat_result


def resolve_path(path: PathArg, roots: Iterable[str]) -> Path:
    """The resolved form of ``path`` (a file or directory) if the policy allows it.

    Raises ValidationError_ (not absolute, does not exist) or ForbiddenError
    (outside the roots after resolving symlinks, a system directory, a credential store).
    Whether a path exists is only revealed once it is known to be allowed.
    """
    roots = list(roots)
    return _locate(path, _prepare_roots(roots), roots).real


def check_paths(paths: Iterable[PathArg] | PathArg, roots: Iterable[str]) -> list[Path]:
    """Validate every path up front, before any model call; raises on the first bad one.

    Files and directories are both accepted; anything else (a FIFO, a device) is not.
    """
    roots = list(roots)
    prepared = _prepare_roots(roots)
    return [_locate_named(p, prepared, roots).real for p in _as_list(paths)]


def _prepare_roots(roots: list[str]) -> list[Path]:
    prepared = []
    for root in roots:
        expanded = os.path.expanduser(os.fspath(root))
        if not os.path.isabs(expanded):
            raise ValueError(f"allowed root {root!r} is not an absolute path")
        prepared.append(Path(os.path.realpath(expanded)))
    return prepared


def _as_list(paths: Iterable[PathArg] | PathArg) -> list[PathArg]:
    # A lone string is one path, not a sequence of one-character paths.
    if isinstance(paths, str | os.PathLike):
        return [paths]
    return list(paths)


def _locate(path: PathArg, roots: list[Path], shown_roots: list[str]) -> _Located:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValidationError_(
            f"invalid file path {path!r}: expected a non-empty absolute path",
            details={"path": repr(path), "reason": "invalid path"},
        )
    if not os.path.isabs(path):
        raise ValidationError_(
            f"file path {path!r} is not absolute; give absolute paths (the daemon does not "
            "share the client's working directory)",
            details={"path": path, "reason": "not an absolute path"},
        )
    real = Path(os.path.realpath(path))
    root = next((r for r in roots if real.is_relative_to(r)), None)
    if root is None:
        via = f" (it resolves to {real})" if str(real) != path else ""
        allowed = ", ".join(shown_roots) or "none configured"
        raise ForbiddenError(
            f"{path!r} is outside the allowed roots{via}; allowed roots: {allowed} "
            "(EXAI_ALLOWED_ROOTS)",
            details={
                "path": path,
                "reason": "outside allowed roots",
                "allowed_roots": list(shown_roots),
            },
        )
    refusal = _refusal(real)
    if refusal is not None:
        raise ForbiddenError(
            f"{path!r} is refused: it is in {refusal}, which is never readable",
            details={"path": path, "reason": f"refused: {refusal}"},
        )
    try:
        st = os.stat(real)
    except (FileNotFoundError, NotADirectoryError):
        raise ValidationError_(
            f"{path!r} does not exist", details={"path": path, "reason": "not found"}
        ) from None
    except OSError as exc:
        raise ValidationError_(
            f"{path!r} cannot be accessed: {exc.strerror}",
            details={"path": path, "reason": _os_reason(exc)},
        ) from None
    return _Located(real, root, st)


def _locate_named(path: PathArg, roots: list[Path], shown_roots: list[str]) -> _Located:
    located = _locate(path, roots, shown_roots)
    if not (stat.S_ISREG(located.st.st_mode) or stat.S_ISDIR(located.st.st_mode)):
        raise ValidationError_(
            f"{os.fspath(path)!r} is not a regular file or a directory",
            details={"path": os.fspath(path), "reason": "not a regular file"},
        )
    return located


def _refusal(real: Path) -> str | None:
    """What makes ``real`` unreadable whatever the roots say, or None."""
    key = _fold(str(real))
    for prefix, label in _denied_prefixes(os.path.expanduser("~")):
        if key == prefix or key.startswith(prefix + os.sep):
            return label
    for part in real.parts[1:]:
        if _fold(part) in CREDENTIAL_DIR_NAMES:
            return f"a credential store ({part})"
    if _fold(real.name) in CREDENTIAL_FILE_NAMES:
        return f"a credential file ({real.name})"
    return None


@lru_cache(maxsize=4)
def _denied_prefixes(home: str) -> tuple[tuple[str, str], ...]:
    entries = [(d, f"a system directory ({d})") for d in SYSTEM_DIRS]
    for base in dict.fromkeys((home, "/root")):
        entries += [
            (os.path.join(base, rel), f"a credential store (~/{rel})") for rel in HOME_CREDENTIALS
        ]
    denied: dict[str, str] = {}
    for prefix, label in entries:
        for form in (prefix, os.path.realpath(prefix)):
            if form != os.sep:
                denied.setdefault(_fold(form), label)
    return tuple(denied.items())


def _fold(text: str) -> str:
    return text.casefold() if _CASE_INSENSITIVE else text


def _os_reason(exc: OSError) -> str:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "not found"
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return f"unreadable ({exc.strerror or exc})"


# --- expanding directories ---------------------------------------------------


def expand_paths(
    paths: Iterable[PathArg] | PathArg,
    roots: Iterable[str],
    *,
    max_files: int = DEFAULT_MAX_FILES,
) -> tuple[list[Path], list[tuple[str, str]]]:
    """Files named or found under the directories named, and (path, reason) skips.

    Every path named is validated before any directory is walked, and raises if bad.
    Directories expand depth-first in name order; entries are not followed out of the
    roots (symlinks are resolved and re-checked), excluded names are skipped, each file
    appears once (by resolved path), and at most ``max_files`` files are returned.
    """
    roots = list(roots)
    prepared = _prepare_roots(roots)
    named = _as_list(paths)
    located = [_locate_named(p, prepared, roots) for p in named]
    walk = _Expansion(prepared, max_files)
    for given, target in zip(named, located, strict=True):
        if walk.full:
            walk.skipped.append((os.fspath(given), f"file limit reached ({max_files} files)"))
        elif stat.S_ISDIR(target.st.st_mode):
            walk.walk(target.real)
        else:
            walk.add_file(target.real)
    return walk.files, walk.skipped


@dataclass
class _Expansion:
    roots: list[Path]
    max_files: int
    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seen: set[Path] = field(default_factory=set)  # files and directories taken, resolved

    @property
    def full(self) -> bool:
        return len(self.files) >= self.max_files

    def add_file(self, real: Path) -> None:
        if real not in self.seen:
            self.seen.add(real)
            self.files.append(real)

    def walk(self, top: Path) -> None:
        if top in self.seen:
            return
        self.seen.add(top)
        stack = [self._scan(top)]
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop()
            elif self.full:
                reason = f"file limit reached ({self.max_files} files); the rest was not listed"
                self.skipped.append((str(top), reason))
                return
            elif (subdir := self._take(entry)) is not None:
                stack.append(self._scan(subdir))

    def _scan(self, directory: Path) -> Iterator[os.DirEntry[str]]:
        try:
            with os.scandir(directory) as it:
                return iter(sorted(it, key=lambda e: e.name))
        except OSError as exc:
            self.skipped.append((str(directory), f"directory {_os_reason(exc)}"))
            return iter(())

    def _take(self, entry: os.DirEntry[str]) -> Path | None:
        """Take a file, return a directory to descend into, or record why neither."""
        path, name = entry.path, entry.name
        try:
            if entry.is_symlink():
                real = Path(os.path.realpath(path))
                if not any(real.is_relative_to(r) for r in self.roots):
                    self.skipped.append((path, f"outside allowed roots (symlink to {real})"))
                    return None
                st = os.stat(real)
            else:
                real = Path(path)  # the parent is already resolved
                st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            self.skipped.append((path, _os_reason(exc)))
            return None
        if stat.S_ISDIR(st.st_mode):
            reason = _excluded_dir(name, real) or _refused(real)
            if reason is None and real in self.seen:
                reason = f"already included (as {real})"
            if reason is not None:
                self.skipped.append((path, reason))
                return None
            self.seen.add(real)
            return real
        if not stat.S_ISREG(st.st_mode):
            self.skipped.append((path, "not a regular file"))
            return None
        reason = _excluded_file(name) or _refused(real)
        if reason is not None:
            self.skipped.append((path, reason))
        else:
            self.add_file(real)
        return None


def _refused(real: Path) -> str | None:
    refusal = _refusal(real)
    return None if refusal is None else f"refused: {refusal}"


def _excluded_dir(name: str, real: Path) -> str | None:
    if name in EXCLUDED_DIRS or name.endswith(".egg-info"):
        return "excluded directory"
    if os.path.isfile(real / "pyvenv.cfg"):
        return "excluded directory (virtual environment)"
    return None


def _excluded_file(name: str) -> str | None:
    if name in _GENERATED_FILES or name.endswith(_GENERATED_SUFFIXES):
        return "excluded (generated file)"
    is_env = name == ".env" or (name.startswith(".env.") and not name.endswith(_ENV_TEMPLATES))
    if is_env or name in _SECRET_NAMES or name.endswith(_SECRET_SUFFIXES):
        return "excluded (may hold secrets; name the file itself to include it)"
    return None


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
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _Skip("not a regular file")
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
