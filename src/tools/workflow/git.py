"""Reading a repository's pending changes with git, without leaving the allowed roots.

The repository is found without git: it is the nearest directory, from the path
given up to the allowed root holding it, with a ``.git`` directory or a ``.git``
file naming one (as in submodules and linked work trees). Its work tree, its git
directories and every part of them git will read (``HEAD``, the index, refs,
objects and their alternates) must resolve inside the roots. git then runs sealed
(:class:`~exai.subprocesses.SealedGit`): it never reads the repository's
configuration, so nothing in the repository can make it run a program or read
from elsewhere, and it gets none of the daemon's environment.

git runs as an asyncio subprocess, never on the event loop's thread, with a
deadline and a cap on how much of its output is read.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from exai.errors import ForbiddenError, InternalError, TimeoutError_, ValidationError_
from exai.files import check_paths, resolve_path
from exai.subprocesses import GitLayout, SealedGit, parse_config_list

__all__ = ["Change", "Diff", "GitRepository", "find_repository"]

GIT_TIMEOUT_S = 30.0
_STDERR_BYTES = 16_384
_GITFILE_BYTES = 4096
_ALTERNATES_DEPTH = 5  # as deep as git follows them
_DIFF = ("diff", "--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=dirty")

Which = Literal["staged", "unstaged", "compare"]


@dataclass(frozen=True, slots=True)
class Change:
    """One changed file as ``git diff --name-status`` reports it (a rename has two paths)."""

    status: str
    paths: tuple[str, ...]

    @property
    def line(self) -> str:
        return "\t".join((self.status, *self.paths))


@dataclass(frozen=True, slots=True)
class Diff:
    which: Which
    text: str
    truncated: bool


@dataclass(frozen=True, slots=True)
class _Output:
    stdout: bytes
    stderr: str
    returncode: int
    truncated: bool


async def _git(sealed: SealedGit, args: tuple[str, ...], max_bytes: int) -> _Output:
    async with sealed.environment() as env:
        return await _run(str(sealed.layout.work_tree), args, env, max_bytes)


async def _run(
    directory: str, args: tuple[str, ...], env: dict[str, str], max_bytes: int
) -> _Output:
    try:
        proc = await asyncio.create_subprocess_exec(
            "git", *args, cwd=directory,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
    except FileNotFoundError:
        raise InternalError("git is not installed on the daemon's host") from None
    assert proc.stdout is not None and proc.stderr is not None
    stderr_task = asyncio.ensure_future(_read_bounded(proc.stderr, _STDERR_BYTES, drain=True))
    try:
        async with asyncio.timeout(GIT_TIMEOUT_S):
            stdout = await _read_bounded(proc.stdout, max_bytes + 1)
            truncated = len(stdout) > max_bytes
            if truncated:
                proc.kill()  # it has said enough; the rest is never read
            stderr = await stderr_task
            returncode = await proc.wait()
    except TimeoutError:
        raise TimeoutError_(f"git {args[0]} did not finish within {GIT_TIMEOUT_S:g}s") from None
    finally:
        stderr_task.cancel()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if truncated:
        returncode = 0  # killed on purpose once it had said enough
    return _Output(stdout[:max_bytes], stderr.decode(errors="replace").strip(), returncode,
                   truncated)  # fmt: skip


async def _read_bounded(stream: asyncio.StreamReader, limit: int, drain: bool = False) -> bytes:
    """Up to ``limit`` bytes of ``stream``; with ``drain``, the rest is read and dropped
    so the writer never blocks on a full pipe."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await stream.read(min(65_536, limit - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    while drain and await stream.read(65_536):
        pass
    return b"".join(chunks)


class GitRepository:
    """A work tree inside the allowed roots; every git command runs against it, sealed."""

    def __init__(self, sealed: SealedGit) -> None:
        self._sealed = sealed
        self.root = str(sealed.layout.work_tree)

    async def _run(self, *args: str, max_bytes: int = 1_000_000) -> _Output:
        out = await _git(self._sealed, args, max_bytes)
        if out.returncode != 0:
            raise ValidationError_(f"git {args[0]} failed in {self.root}: {out.stderr}")
        return out

    async def resolve_ref(self, ref: str) -> str:
        """The commit ``ref`` names, as a hash, so it can never be read as an option."""
        out = await _git(
            self._sealed,
            ("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"),
            4096,
        )
        if out.returncode != 0:
            raise ValidationError_(
                f"compare_to {ref!r} is not a commit in {self.root}",
                details={"field": "compare_to", "reason": "unknown ref"},
            )
        return out.stdout.decode().strip()

    def _diff_args(self, which: Which, commit: str | None) -> tuple[str, ...]:
        if which == "staged":
            return ("--cached",)
        if which == "compare":
            assert commit is not None
            return (commit,)
        return ()

    async def changed_files(self, which: Which, commit: str | None = None) -> list[Change]:
        """What ``git diff --name-status`` reports, paths as they are (``-z``)."""
        args = (*_DIFF, "--name-status", "-z", *self._diff_args(which, commit), "--")
        fields = (await self._run(*args)).stdout.decode(errors="replace").split("\0")
        changes: list[Change] = []
        while len(fields) > 1:
            status = fields.pop(0)
            count = 2 if status[:1] in ("R", "C") else 1
            changes.append(Change(status, tuple(fields[:count])))
            del fields[:count]
        return changes

    async def hard_linked(self, changes: list[Change]) -> list[str]:
        """The changed work-tree files with more than one hard link. git would read
        them, and another of their names may be outside the roots; they are left out
        of diffs that read the work tree (:meth:`diff` with ``leave_out``)."""

        def find() -> list[str]:
            found = []
            for path in (p for change in changes for p in change.paths):
                try:
                    st = os.lstat(os.path.join(self.root, path))
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    found.append(path)
            return found

        return await asyncio.to_thread(find)

    async def untracked(self, limit: int = 200) -> list[str]:
        out = await self._run("ls-files", "--others", "--exclude-standard", max_bytes=65_536)
        return out.stdout.decode(errors="replace").splitlines()[:limit]

    async def diff(
        self,
        which: Which,
        max_bytes: int,
        commit: str | None = None,
        leave_out: Sequence[str] = (),
    ) -> Diff:
        excluded = [f":(top,exclude,literal){path}" for path in leave_out]
        out = await self._run(
            *_DIFF, *self._diff_args(which, commit), "--", *excluded, max_bytes=max_bytes
        )
        return Diff(which, out.stdout.decode(errors="replace"), out.truncated)


async def find_repository(path: str, roots: list[str]) -> GitRepository:
    """The work tree containing ``path`` (already checked to be inside the roots).

    Raises ValidationError_ when there is none below the roots, and ForbiddenError
    when a part of it resolves outside them (a ``.git`` file pointing elsewhere, say).
    """
    try:
        layout = await asyncio.to_thread(_locate, path, roots)
    except OSError as exc:  # a part of it vanished or changed while being looked at
        raise ValidationError_(
            f"the git repository of {path!r} could not be read: {exc.strerror or exc}; it "
            "changed while being read",
            details={"field": "path", "reason": "unreadable git directory"},
        ) from None
    sealed = SealedGit(layout)
    config = layout.common_dir / "config"
    if await asyncio.to_thread(config.is_file):
        # Read as a file, never as configuration: includes are not followed, and only
        # settings about how content compares are kept.
        out = await _git(sealed, ("config", "--file", str(config), "--list", "-z"), 1_000_000)
        if out.returncode == 0 and not out.truncated:
            sealed = SealedGit(layout, parse_config_list(out.stdout))
    return GitRepository(sealed)


def _locate(path: str, roots: list[str]) -> GitLayout:
    start = resolve_path(path, roots)
    real_roots = [Path(os.path.realpath(os.path.expanduser(r))) for r in roots]
    directory = start if start.is_dir() else start.parent
    while True:
        layout = _layout_at(directory, path, roots)
        if layout is not None:
            _check_parts(layout, path, roots)
            return layout
        parent = directory.parent
        if parent == directory or not any(parent.is_relative_to(r) for r in real_roots):
            raise ValidationError_(
                f"{path!r} is not a git repository (or has no work tree) inside the allowed roots",
                details={"field": "path", "reason": "not a git repository"},
            )
        directory = parent


def _layout_at(directory: Path, path: str, roots: list[str]) -> GitLayout | None:
    """The repository whose ``.git`` is in ``directory``, or None when there is none
    (or it is not a git directory, in which case the search goes on upwards, as git's)."""
    dotgit = directory / ".git"
    if not os.path.lexists(dotgit):
        return None
    real = _inside(dotgit, path, directory, roots)
    if real.is_dir():
        git_dir = real
    else:
        text = _head_of(real)
        if not text.startswith("gitdir: "):
            return None
        git_dir = _inside(directory / text[8:].strip(), path, directory, roots)
    common_dir = git_dir
    if (git_dir / "commondir").is_file():
        common_dir = _inside(git_dir / _head_of(git_dir / "commondir").strip(), path, directory,
                             roots)  # fmt: skip
    layout = GitLayout(directory, git_dir, common_dir)
    valid = (git_dir / "HEAD").is_file() and layout.objects.is_dir()
    return layout if valid and (common_dir / "refs").is_dir() else None


def _check_parts(layout: GitLayout, path: str, roots: list[str]) -> None:
    """Every part git reads must resolve inside the roots, alternates included."""
    parts = [layout.git_dir / "HEAD", layout.index, layout.objects, layout.common_dir / "config"]
    parts += [target for _, target in layout.links()]
    for part in parts:
        if os.path.lexists(part):
            _inside(part, path, layout.work_tree, roots)
    objects, depth = [layout.objects], 0
    while objects and depth < _ALTERNATES_DEPTH:
        found = []
        for directory in objects:
            alternates = directory / "info" / "alternates"
            lines = _head_of(alternates).splitlines() if alternates.is_file() else []
            for line in (line.strip() for line in lines):
                if line.startswith('"'):
                    # git unquotes these; a path exai cannot check is not used.
                    raise ForbiddenError(
                        f"the git repository of {path!r} is not entirely inside the allowed "
                        f"roots: {alternates} names an object store with a quoted path, which "
                        "exai cannot check",
                        details={"field": "path", "reason": "repository outside allowed roots"},
                    )
                if line and not line.startswith("#") and os.path.lexists(directory / line):
                    found.append(_inside(directory / line, path, layout.work_tree, roots))
        objects, depth = found, depth + 1


def _head_of(file: Path) -> str:
    with open(file, "rb") as f:
        return f.read(_GITFILE_BYTES).decode(errors="replace")


def _inside(part: Path, path: str, work_tree: Path, roots: list[str]) -> Path:
    try:
        return check_paths([part], roots)[0]
    except ForbiddenError as exc:
        raise ForbiddenError(
            f"the git repository of {path!r} (work tree {work_tree}) is not entirely inside "
            f"the allowed roots: {exc.message}",
            details={"field": "path", "reason": "repository outside allowed roots"},
        ) from None
