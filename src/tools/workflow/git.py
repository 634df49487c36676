"""Reading a repository's pending changes with git, without leaving the allowed roots.

git runs as an asyncio subprocess, never on the event loop's thread, with a
deadline and a cap on how much of its output is read. It is run hermetically:
the repository is found from the path given but never above the allowed roots
(``GIT_CEILING_DIRECTORIES``), its work tree and git directories must resolve
inside the roots, the caller's ``GIT_*`` environment and the user's and system's
git configuration are ignored, and external diff drivers, text conversion and
filesystem monitors are off, so a repository cannot make git run programs or
read from elsewhere through them.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Literal

from exai.errors import ForbiddenError, InternalError, TimeoutError_, ValidationError_
from exai.files import acheck_paths

__all__ = ["Diff", "GitRepository", "find_repository"]

GIT_TIMEOUT_S = 30.0
_STDERR_BYTES = 16_384
_SAFE_CONFIG = (
    "-c", "core.fsmonitor=false",
    "-c", "core.untrackedCache=false",
    "-c", "core.quotePath=false",
    "-c", "diff.external=",
    "-c", "color.ui=never",
)  # fmt: skip
_DIFF = ("diff", "--no-ext-diff", "--no-textconv", "--no-color")

Which = Literal["staged", "unstaged", "compare"]


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


def _environment(roots: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    ceilings = sorted({os.path.dirname(os.path.realpath(r)) for r in roots})
    env.update({
        "GIT_CEILING_DIRECTORIES": os.pathsep.join(ceilings),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_PAGER": "cat",
        "LC_ALL": "C",
    })  # fmt: skip
    return env


async def _git(
    directory: str, args: tuple[str, ...], env: dict[str, str], max_bytes: int
) -> _Output:
    try:
        proc = await asyncio.create_subprocess_exec(
            "git", *_SAFE_CONFIG, "-C", directory, *args,
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
    """A work tree inside the allowed roots; every git command runs against it."""

    def __init__(self, root: str, env: dict[str, str]) -> None:
        self.root = root
        self._env = env

    async def _run(self, *args: str, max_bytes: int = 1_000_000) -> _Output:
        out = await _git(self.root, args, self._env, max_bytes)
        if out.returncode != 0:
            raise ValidationError_(f"git {args[0]} failed in {self.root}: {out.stderr}")
        return out

    async def resolve_ref(self, ref: str) -> str:
        """The commit ``ref`` names, as a hash, so it can never be read as an option."""
        out = await _git(
            self.root,
            ("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"),
            self._env,
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

    async def changed_files(self, which: Which, commit: str | None = None) -> list[str]:
        """``git diff --name-status`` lines, e.g. ``M\tsrc/app.py``."""
        out = await self._run(*_DIFF, "--name-status", *self._diff_args(which, commit), "--")
        return out.stdout.decode(errors="replace").splitlines()

    async def untracked(self, limit: int = 200) -> list[str]:
        out = await self._run("ls-files", "--others", "--exclude-standard", max_bytes=65_536)
        return out.stdout.decode(errors="replace").splitlines()[:limit]

    async def diff(self, which: Which, max_bytes: int, commit: str | None = None) -> Diff:
        out = await self._run(*_DIFF, *self._diff_args(which, commit), "--", max_bytes=max_bytes)
        return Diff(which, out.stdout.decode(errors="replace"), out.truncated)


async def find_repository(path: str, roots: list[str]) -> GitRepository:
    """The work tree containing ``path`` (already checked to be inside the roots).

    Raises ValidationError_ when there is none below the roots, and ForbiddenError
    when its work tree or git directory resolves outside them (a ``.git`` file
    pointing elsewhere, say).
    """
    env = _environment(roots)
    out = await _git(
        path,
        ("rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"),
        env,
        65_536,
    )
    lines = out.stdout.decode(errors="replace").splitlines()
    if out.returncode != 0 or len(lines) != 3:
        raise ValidationError_(
            f"{path!r} is not a git repository (or has no work tree)",
            details={"field": "path", "reason": "not a git repository"},
        )
    top, git_dir, common = lines
    if not os.path.isabs(common):
        common = os.path.join(path, common)
    try:
        resolved = await acheck_paths([top, git_dir, common], roots)
    except ForbiddenError as exc:
        raise ForbiddenError(
            f"the git repository of {path!r} (work tree {top}, git directory {git_dir}) "
            f"is not entirely inside the allowed roots: {exc.message}",
            details={"field": "path", "reason": "repository outside allowed roots"},
        ) from None
    return GitRepository(str(resolved[0]), env)
