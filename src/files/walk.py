"""Expanding directories: stable order, the usual exclusions, every skip listed with its reason."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from exai.files.policy import (
    PathArg,
    _as_list,
    _hard_links,
    _locate_named,
    _os_reason,
    _prepare_roots,
    _refusal,
)

__all__ = ["DEFAULT_MAX_FILES", "EXCLUDED_DIRS", "expand_paths"]

DEFAULT_MAX_FILES = 1000

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
        if reason is None and (links := _hard_links(st)) is not None:
            reason = f"refused: {links}"
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
