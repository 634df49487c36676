"""Every child process exai starts: the environment it gets, and for git, its configuration.

A child inherits nothing by accident. :func:`child_environment` is the whole
environment of a child: ``PATH``, a ``HOME`` below which nothing exists, the
locale and ``TMPDIR``; no provider key, token or database URL, whatever the
daemon holds. Each caller adds what that child is owed, in the open:

* git (:class:`SealedGit`) gets its own variables, described below;
* an external MCP server gets the ``env`` its operator wrote for it in the servers
  file, and a private, empty home directory (npm's and uv's caches work);
* exai's own daemon, started by the shim (:func:`daemon_environment`), gets exai's
  settings and the variables its runtime reads (proxies, CA bundles, libpq), since
  it is exai, not a program someone else chose;
* exai's own worker processes (the audit writer, :func:`worker_environment`) get
  those runtime variables but no setting: the daemon sends them their
  configuration over a pipe.

git is the dangerous child. It reads the programs it runs from the repository's
configuration (filters, diff drivers, the fsmonitor, hooks, pagers, credential and
transport helpers, promisor remotes it fetches missing objects from) and from files
that configuration or the work tree names (``include.path``, ``.gitattributes``).
A repository inside the allowed roots is untrusted input. Overriding the dangerous
settings one by one (``-c key=``) cannot be made complete: filter and driver names
are whatever the repository's attributes say, a missing object makes even
``rev-parse`` fetch it through a configured helper, git starts git inside each
submodule with that submodule's own configuration, and each release adds settings.
So git never reads the repository's configuration at all.

:class:`SealedGit` runs git with ``GIT_DIR`` pointing at a sealed directory that
exai builds for each command: a copy of ``HEAD``; symlinks to the repository's
``refs``, ``packed-refs``, ``shallow``, ``info/exclude`` and shared index files;
and a ``config`` that exai writes. The repository's objects, index and work tree
are named through ``GIT_OBJECT_DIRECTORY``, ``GIT_INDEX_FILE`` and
``GIT_WORK_TREE``. The system and global configuration are off
(``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL``), as are the system attributes
(``GIT_ATTR_NOSYSTEM``) and every transport (``GIT_ALLOW_PROTOCOL`` empty), and
``HOME`` is :data:`NO_HOME`. So the only configuration git sees is exai's, which
names no program: a ``filter=`` or ``diff=`` attribute in the work tree refers to
a driver that is not defined and does nothing, the sealed directory has no hooks,
there is no promisor remote and no transport to fetch with. The sealed
configuration also keeps git out of submodules' work trees
(``diff.ignoreSubmodules=dirty``): git still shows which commit a submodule has
checked out, which it reads itself, but never starts git inside one.

What the repository's configuration legitimately says about its files is kept: a
few settings that change how content is compared, never a program (line-end
conversion, file modes, case folding, the object format), are copied when their
values are plain words (:data:`COPIED_SETTINGS`). The file is read with
``git config --file`` under the same seal, which follows no include. Everything
else in it, ``core.worktree`` included, is ignored.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from exai.errors import ValidationError_
from exai.settings import Settings

__all__ = [
    "COPIED_SETTINGS",
    "NO_HOME",
    "GitLayout",
    "SealedGit",
    "child_environment",
    "daemon_environment",
    "parse_config_list",
    "worker_environment",
]

# A HOME below which nothing can exist: nothing is read from it or written to it.
NO_HOME = os.devnull

# What every child gets from the daemon's environment, when set: where programs
# are, the locale, the temporary directory. Windows cannot start a program without
# the last group.
_BASE = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")
_PLATFORM = ("SYSTEMROOT", "COMSPEC", "PATHEXT", "WINDIR") if sys.platform == "win32" else ()

# What exai's own daemon reads besides its settings: its home and data directory,
# the interpreter's import path, and what its HTTP and Postgres clients honour.
_DAEMON_RUNTIME = (
    "HOME", "USER", "LOGNAME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "PYTHONPATH",
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
    "http_proxy", "https_proxy", "all_proxy", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR",
    "PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGPASSFILE", "PGSSLMODE",
    "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGSERVICE", "PGSERVICEFILE",
)  # fmt: skip


def child_environment(
    *, home: str | os.PathLike[str] = NO_HOME, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a child process: ``PATH``, ``HOME`` (``home``), the locale
    and ``TMPDIR`` from the daemon's environment, then ``extra`` on top."""
    env = {k: os.environ[k] for k in (*_BASE, *_PLATFORM) if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = os.fspath(home)
    env.update(extra or {})
    return env


def worker_environment() -> dict[str, str]:
    """The environment of one of exai's own worker processes (the audit writer): the
    child environment, the user's real home and the variables exai's runtime honours,
    but no setting: a worker gets its configuration from the daemon over a pipe."""
    env = child_environment(home=os.environ.get("HOME", NO_HOME))
    env.update({k: v for k, v in os.environ.items() if k in _DAEMON_RUNTIME})
    return env


def daemon_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an exai daemon started by the shim: the worker environment,
    every variable a setting is read from (``EXAI_*`` and the vendors' names for
    credentials, in any case, as settings are matched); then ``extra``."""
    names = _setting_names()
    env = worker_environment()
    env.update({k: v for k, v in os.environ.items() if k.upper() in names})
    env.update(extra or {})
    return env


def _setting_names() -> frozenset[str]:
    prefix = str(Settings.model_config.get("env_prefix", ""))
    names = set()
    for name, info in Settings.model_fields.items():
        names.add(f"{prefix}{name}".upper())
        choices = getattr(info.validation_alias, "choices", ())
        names.update(str(choice).upper() for choice in choices)
    return frozenset(names)


# --- git -------------------------------------------------------------------------

# Settings of the repository that change how content is compared, not what runs;
# copied into the sealed configuration when their value is a plain word.
COPIED_SETTINGS = frozenset({
    "core.autocrlf", "core.eol", "core.filemode", "core.symlinks", "core.ignorecase",
    "core.precomposeunicode", "core.checkstat", "core.trustctime", "core.bigfilethreshold",
    "extensions.objectformat",
})  # fmt: skip
_PLAIN = re.compile(r"[A-Za-z0-9]{1,16}")
_HEAD_BYTES = 4096

# exai's configuration of every sealed git; it names no program.
_SEALED_CONFIG = """\
[core]
\trepositoryformatversion = {version}
\tbare = false
\tquotePath = false
\tattributesFile = {null}
\texcludesFile = {null}
{copied}[diff]
\tignoreSubmodules = dirty
[color]
\tui = never
"""


@dataclass(frozen=True, slots=True)
class GitLayout:
    """Where a repository's parts are, resolved. ``git_dir`` holds what belongs to
    one work tree (``HEAD``, the index); ``common_dir`` what linked work trees share
    (objects, refs); they are the same directory for a plain checkout."""

    work_tree: Path
    git_dir: Path
    common_dir: Path

    @property
    def objects(self) -> Path:
        return self.common_dir / "objects"

    @property
    def index(self) -> Path:
        return self.git_dir / "index"

    def links(self) -> list[tuple[str, Path]]:
        """What a sealed directory links to, as (name inside it, the repository's own)."""
        common = self.common_dir
        links = [(name, common / name) for name in ("refs", "packed-refs", "shallow")]
        links.append(("info/exclude", common / "info" / "exclude"))
        links += [(p.name, p) for p in sorted(self.git_dir.glob("sharedindex.*"))]
        return links


def parse_config_list(output: bytes) -> dict[str, str]:
    """The :data:`COPIED_SETTINGS` in ``git config --list -z`` output whose values are
    plain words; a key given without a value is ``true``, as git reads it."""
    copied: dict[str, str] = {}
    for item in output.decode(errors="replace").split("\0"):
        key, newline, value = item.partition("\n")
        key, value = key.lower(), value if newline else "true"
        if key in COPIED_SETTINGS and _PLAIN.fullmatch(value):
            copied[key] = value
    return copied


@dataclass
class SealedGit:
    """How to run git against ``layout`` without reading its configuration.

    ``copied`` holds the repository settings kept (see :func:`parse_config_list`).
    ``async with sealed.environment() as env`` builds a sealed directory for one
    command and yields git's whole environment; the directory is removed afterwards.
    """

    layout: GitLayout
    copied: Mapping[str, str] = field(default_factory=dict)

    @asynccontextmanager
    async def environment(self) -> AsyncIterator[dict[str, str]]:
        sealed = Path(tempfile.mkdtemp(prefix="exai-git-"))
        try:
            try:
                await asyncio.to_thread(self._build, sealed)
            except OSError as exc:
                raise ValidationError_(
                    f"cannot read the git directory {self.layout.git_dir}: "
                    f"{exc.strerror or exc}; it may have changed while being read",
                    details={"field": "path", "reason": "unreadable git directory"},
                ) from None
            yield child_environment(extra={
                "GIT_DIR": str(sealed),
                "GIT_WORK_TREE": str(self.layout.work_tree),
                "GIT_INDEX_FILE": str(self.layout.index),
                "GIT_OBJECT_DIRECTORY": str(self.layout.objects),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_ATTR_NOSYSTEM": "1",
                "GIT_ALLOW_PROTOCOL": "",
                "GIT_TERMINAL_PROMPT": "0",
                "GIT_OPTIONAL_LOCKS": "0",
                "LC_ALL": "C",
            })  # fmt: skip
        finally:
            # A handful of entries in a fresh directory: removed here, even when cancelled.
            shutil.rmtree(sealed, ignore_errors=True)

    def _build(self, sealed: Path) -> None:
        with open(self.layout.git_dir / "HEAD", "rb") as f:
            head = f.read(_HEAD_BYTES + 1)
        if len(head) > _HEAD_BYTES:
            raise OSError(errno.EFBIG, "HEAD is too large to be a git HEAD")
        (sealed / "HEAD").write_bytes(head)
        (sealed / "info").mkdir()
        for name, target in self.layout.links():
            if os.path.lexists(target):
                (sealed / name).symlink_to(target)
        (sealed / "refs").mkdir(exist_ok=True)  # git insists on one, even empty
        (sealed / "config").write_text(self._config())

    def _config(self) -> str:
        copied = dict(self.copied)
        extensions = ""
        if "extensions.objectformat" in copied:
            extensions = f"[extensions]\n\tobjectFormat = {copied.pop('extensions.objectformat')}\n"
        core = "".join(f"\t{key.split('.', 1)[1]} = {value}\n" for key, value in copied.items())
        return _SEALED_CONFIG.format(
            version=1 if extensions else 0, null=os.devnull, copied=core + extensions
        )
