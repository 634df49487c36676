"""A git repository that tries every way it knows to make git run its programs.

Used by the subprocess tests: a repository inside the allowed roots is untrusted
input, and git reads programs to run from its configuration (filters, diff drivers,
hooks, the fsmonitor, pagers, helpers, transports) and from files it pulls in
(includes, attributes). Every such program here is ``evil.sh NAME``, which

* leaves a marker file ``NAME.<pid>`` in the markers directory, holding the
  environment it was given, so a test can see that it ran and what it saw;
* prints a secret kept outside the allowed roots, and its environment, so if git
  used its output (a clean filter's, a textconv's), the secrets would travel on in
  the diff: to the model, into the result and into the conversation store.

The repository has staged, unstaged and untracked changes in files that route
through each filter and diff driver, a submodule with a hostile configuration of
its own, and a promisor remote, so asking for a commit it does not have would make
git fetch it through a configured program.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FILES",
    "HOOKS",
    "PROGRAM_SETTINGS",
    "PROGRAM_SETTINGS_IN_ALL",
    "Hostile",
    "build_hostile_repo",
    "git_env_attacks",
    "markers_written",
]

# githooks(5), git 2.39: every hook git knows.
HOOKS = (
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
    "post-merge", "pre-push", "pre-receive", "update", "proc-receive", "post-receive",
    "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite",
    "sendemail-validate", "fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist",
    "p4-post-changelist", "p4-pre-submit", "post-index-change",
)  # fmt: skip

_EVIL = """#!/bin/sh
name="$1"
{{ echo "$@"; env; }} > "{markers}/$name.$$"
case "$name" in *-process) exec "{python}" "{process}" ;; esac
cat "{secret}" 2>/dev/null
env
case "$name" in *filter-*) cat ;; esac
exit 0
"""

# A long-running filter (``filter.<name>.process``) speaks git's pkt-line protocol.
_PROCESS_FILTER = """import os, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
def packet():
    size = int(inp.read(4) or b"0", 16)
    return inp.read(size - 4) if size else None
def packets():
    items = []
    while (item := packet()) is not None:
        items.append(item)
    return items
def send(*items):
    for item in items:
        out.write(b"%04x" % (len(item) + 4) + item)
    out.write(b"0000")
    out.flush()
packets()
send(b"git-filter-server\\n", b"version=2\\n")
packets()
send(b"capability=clean\\n", b"capability=smudge\\n")
leak = open({secret!r}, "rb").read() + repr(dict(os.environ)).encode() + b"\\n"
while packets():
    content = b"".join(packets())
    send(b"status=success\\n")
    data = leak + content
    send(*[data[i:i + 60000] for i in range(0, len(data), 60000)])
    send()
"""


@dataclass(frozen=True)
class Hostile:
    repo: Path  # the hostile repository, inside the roots
    markers: Path  # where its programs leave a file when they run (outside the roots)
    secret: str  # the content of a file outside the roots that its programs print
    evil: Path  # the program every hostile setting names

    def run(self, name: str) -> str:
        """The shell command line that runs the hostile program as ``name``."""
        return f"sh {self.evil} {name}"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com",
         "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always",
         "-C", str(repo), *args],
        check=True, capture_output=True, env=_plain_env(),
    )  # fmt: skip


def _plain_env() -> dict[str, str]:
    # The repository is built by a plain git, whatever the test has put in os.environ.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def _config(repo: Path, entries: dict[str, str], file: Path | None = None) -> None:
    where = ["--file", str(file)] if file is not None else []
    for key, value in entries.items():
        _git(repo, "config", *where, "--add", key, value)


def _programs_in(settings: dict[str, str], hostile: Hostile, where: str = "") -> dict[str, str]:
    """``settings`` with the hostile program written in. Each leaves a marker named
    after its setting (``filter.evil.clean`` leaves ``filter-evil-clean.<pid>``),
    prefixed with ``where`` when it is set outside the repository's own configuration
    (``included-``, ``submodule-``)."""
    return {k: v.format(hostile.run(where + k.replace(".", "-"))) for k, v in settings.items()}


def build_hostile_repo(root: Path, outside: Path) -> Hostile:
    """A hostile repository at ``root/hostile``; markers and the secret under ``outside``."""
    hostile = _programs(root / "hostile", outside)
    repo = hostile.repo
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    for name in FILES:
        (repo / name).write_text(f"first version of {name}\n")
    _git(repo, "add", *FILES)
    _git(repo, "commit", "-q", "-m", "first")
    _add_submodule(repo, hostile)
    _git(repo, "commit", "-q", "-m", "second")
    for name in FILES[:4]:
        (repo / name).write_text(f"staged version of {name}\n")
    _git(repo, "add", "--", *FILES[:4])
    _configure(repo, hostile)
    for name in FILES:
        (repo / name).write_text(f"work tree version of {name}\n")
    (repo / "sub" / "s.txt").write_text("SUBMODULE FILE\n")  # same size: git must read it
    (repo / "untracked.txt").write_text("untracked\n")
    return hostile


# The tracked files: four with staged changes, all eight with unstaged ones.
FILES = ("a.txt", "b.md", "c.py", "d.cfg", "e.txt", "f.txt", "g.ini", "h.txt")


def _programs(repo: Path, outside: Path) -> Hostile:
    markers = outside / "markers"
    markers.mkdir(parents=True, exist_ok=True)
    secret_file = outside / "secret.txt"
    secret = f"OUTSIDE-SECRET-{os.urandom(8).hex()}"
    secret_file.write_text(secret + "\n")
    process = outside / "process_filter.py"
    process.write_text(_PROCESS_FILTER.format(secret=str(secret_file)))
    evil = outside / "evil.sh"
    evil.write_text(_EVIL.format(markers=markers, secret=secret_file, python=sys.executable,
                                 process=process))  # fmt: skip
    evil.chmod(0o755)
    return Hostile(repo, markers, secret, evil)


def _configure(repo: Path, hostile: Hostile) -> None:
    """Route the files through the programs, from every attributes source and every
    place configuration comes from; install every hook, twice."""
    (repo / ".gitattributes").write_text(
        "a.txt filter=evil\nb.md filter=proc\nc.py diff=evil\ne.txt filter=inc\n"
        "f.txt filter=incif\nh.txt filter=evil diff=evil\n"
    )
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("d.cfg filter=evil diff=evil\n")
    (repo / "attributes-file").write_text("g.ini filter=evil diff=evil\n")
    for name, settings in (("included", INCLUDED), ("included-if", INCLUDED_IF)):
        _config(repo, _programs_in(settings, hostile, f"{name}-"), file=repo / f"{name}.gitconfig")
    hooks = repo / "hooks-dir"
    hooks.mkdir()
    for hook in HOOKS:
        for where in (hooks, repo / ".git" / "hooks"):
            (where / hook).write_text(f'#!/bin/sh\nexec {hostile.run("hook-" + hook)} "$@"\n')
            (where / hook).chmod(0o755)
    _config(repo, {**PLAIN_SETTINGS, **_programs_in(PROGRAM_SETTINGS, hostile)})
    _config(repo, {
        "core.hooksPath": str(hooks),
        "core.attributesFile": str(repo / "attributes-file"),
        "include.path": str(repo / "included.gitconfig"),
        "includeIf.gitdir:/.path": str(repo / "included-if.gitconfig"),
    })  # fmt: skip


def _add_submodule(repo: Path, hostile: Hostile) -> None:
    """``sub``: a submodule whose own configuration routes its file through a filter
    (git checks whether a submodule changed by running git inside it)."""
    sub = repo / "sub"
    sub.mkdir()
    _git(sub, "init", "-q")
    (sub / "s.txt").write_text("submodule file\n")
    (sub / ".gitattributes").write_text("s.txt filter=evil\n")
    _git(sub, "add", "s.txt", ".gitattributes")
    _git(sub, "commit", "-q", "-m", "submodule")
    _config(sub, _programs_in(SUBMODULE, hostile, "submodule-"))
    _git(repo, "submodule", "add", "-q", "./sub", "sub")


# Settings of git 2.39 that name a program (git-config(1)), and how the program is
# written in each. Settings that only matter to commands exai never runs are here
# too, so a command added later cannot pick one up unnoticed.
PROGRAM_SETTINGS: dict[str, str] = {
    "filter.evil.clean": "{} %f",
    "filter.evil.smudge": "{} %f",
    "filter.proc.process": "{}",
    "diff.evil.textconv": "{}",
    "diff.evil.command": "{}",
    "diff.external": "{}",
    "core.fsmonitor": "{}",
    "core.pager": "{}",
    "pager.diff": "{}",
    "pager.status": "{}",
    "pager.log": "{}",
    "core.editor": "{}",
    "sequence.editor": "{}",
    "core.askPass": "{}",
    "credential.helper": "!{}",
    "core.sshCommand": "{}",
    "core.gitProxy": "{}",
    "core.alternateRefsCommand": "{}",
    "gpg.program": "{}",
    "gpg.ssh.program": "{}",
    "gpg.x509.program": "{}",
    "merge.evil.driver": "{}",
    "difftool.evil.cmd": "{}",
    "mergetool.evil.cmd": "{}",
    "browser.evil.cmd": "{}",
    "submodule.sub.update": "!{}",
    "uploadpack.packObjectsHook": "{}",
    # Promisor remotes: an object git lacks is fetched from them, through these.
    "remote.origin.uploadpack": "{}",
    "remote.local.uploadpack": "{}",
    "remote.ext.url": "ext::{}",
}
# In the files the repository's configuration includes, and in its submodule's.
INCLUDED = {"filter.inc.clean": "{} %f", "core.pager": "{}"}
INCLUDED_IF = {"filter.incif.clean": "{} %f"}
SUBMODULE = {"filter.evil.clean": "{} %f", "core.fsmonitor": "{}"}
# How many settings in all name a hostile program.
PROGRAM_SETTINGS_IN_ALL = len(PROGRAM_SETTINGS) + len(INCLUDED) + len(INCLUDED_IF) + len(SUBMODULE)

PLAIN_SETTINGS: dict[str, str] = {
    "core.fsmonitorHookVersion": "2",
    "core.untrackedCache": "true",
    "log.showSignature": "true",
    "diff.tool": "evil",
    "merge.tool": "evil",
    "web.browser": "evil",
    "protocol.allow": "always",
    "protocol.ext.allow": "always",
    "core.repositoryformatversion": "1",
    "extensions.partialClone": "origin",
    "remote.origin.url": "ssh://hostile.invalid/repo.git",
    "remote.origin.promisor": "true",
    "remote.local.url": "file:///nonexistent/repo.git",
    "remote.local.promisor": "true",
    "remote.ext.promisor": "true",
}


def git_env_attacks(hostile: Hostile) -> dict[str, str]:
    """``GIT_*`` variables that would make any git started with them run the hostile
    program (or write a file, ``GIT_TRACE``): set in the daemon's own environment."""
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": hostile.run("env-git-config-count"),
        "GIT_CONFIG_PARAMETERS": f"'diff.external'='{hostile.run('env-git-config-parameters')}'",
        "GIT_EXTERNAL_DIFF": hostile.run("env-git-external-diff"),
        "GIT_PAGER": hostile.run("env-git-pager"),
        "GIT_EDITOR": hostile.run("env-git-editor"),
        "GIT_ASKPASS": hostile.run("env-git-askpass"),
        "GIT_SSH_COMMAND": hostile.run("env-git-ssh-command"),
        "GIT_TRACE": str(hostile.markers / "env-git-trace"),
        "GIT_TRACE2_EVENT": str(hostile.markers / "env-git-trace2"),
    }


def markers_written(hostile: Hostile) -> list[str]:
    """The names of the hostile programs that ran (and of trace files written)."""
    return sorted(p.name for p in hostile.markers.iterdir())
