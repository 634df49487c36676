"""git runs nothing a repository configures and sees none of the daemon's secrets.

The repository (``tests/hostile_git.py``) names a program in every setting git
reads one from, routes its files through them from every attributes source, pulls
more of them in through includes, has a hostile submodule and promisor remotes;
the daemon's own environment holds provider keys, a token, a store URL and
``GIT_*`` variables that would make any git started with them run the program.
Each program leaves a marker when it runs and prints the secrets if its output is
used, so both what ran and what travelled are visible.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from exai.errors import ForbiddenError
from exai.protocol import ErrorCode
from exai.tools.workflow.git import GitRepository, find_repository
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.hostile_git import FILES, Hostile, build_hostile_repo, git_env_attacks, markers_written
from tests.tools.workflow_helpers import git, make_repo, payload, sent_text, step

SECRETS = {
    "KIMI_API_KEY": "sk-kimi-daemon-secret-0f3a9c",
    "GLM_API_KEY": "glm-daemon-secret-7b21e4",
    "EXAI_WS_TOKEN": "ws-token-daemon-secret-5d8e02",
    "EXAI_STORE_URL": "postgresql://exai:store-password-secret-91ac@127.0.0.1:1/exai",
}
MISSING_COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    root = tmp_path / "root"
    return build_hostile_repo(root, tmp_path / "outside")


def _poison(monkeypatch: pytest.MonkeyPatch, hostile: Hostile) -> None:
    """Secrets and hostile ``GIT_*`` variables in the daemon's own environment (after
    its settings were made: ``EXAI_STORE_URL`` would otherwise move its store)."""
    for name, value in {**SECRETS, **git_env_attacks(hostile)}.items():
        monkeypatch.setenv(name, value)


def _leaks(text: str, hostile: Hostile) -> list[str]:
    return [s for s in (*SECRETS.values(), hostile.secret) if s in text]


async def _everything(repo: GitRepository) -> list[str]:
    """What precommit asks git for, every way it can ask."""
    base = await repo.resolve_ref("HEAD~1")
    outputs: list[str] = []
    for which in ("staged", "unstaged"):
        outputs += [change.line for change in await repo.changed_files(which)]
        outputs.append((await repo.diff(which, 1_000_000)).text)
    outputs += [change.line for change in await repo.changed_files("compare", base)]
    outputs.append((await repo.diff("compare", 1_000_000, base)).text)
    outputs += await repo.untracked()
    return outputs


async def test_git_runs_none_of_the_repositorys_programs(hostile, monkeypatch):
    _poison(monkeypatch, hostile)
    roots = [str(hostile.repo.parent)]
    repo = await find_repository(str(hostile.repo), roots)
    outputs = await _everything(repo)
    with pytest.raises(Exception, match="not a commit"):
        await repo.resolve_ref(MISSING_COMMIT)  # a promisor remote would fetch it
    assert markers_written(hostile) == []
    text = "\n".join(outputs)
    assert _leaks(text, hostile) == []
    # The content is git's own, not a filter's: every changed file, as written.
    for name in FILES:
        assert f"+work tree version of {name}" in text, name
    assert "+staged version of a.txt" in text


async def test_precommit_runs_nothing_and_no_secret_travels(hostile, monkeypatch, tmp_path,
                                                            emulator, client_factory):  # fmt: skip
    settings = make_settings(tmp_path, **emulated_providers(emulator),
                             allowed_roots=[str(hostile.repo.parent)])  # fmt: skip
    _poison(monkeypatch, hostile)
    results: list[str] = []
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        first = payload(await client.call("precommit", step(1, 2, tool="precommit",
                                                            path=str(hostile.repo))))  # fmt: skip
        final = await client.call("precommit", step(2, 2, tool="precommit", final=True,
                                                    path=str(hostile.repo),
                                                    cid=first["continuation_id"]))  # fmt: skip
        compare = await client.call("precommit", step(1, 1, tool="precommit", final=True,
                                                      path=str(hostile.repo),
                                                      compare_to="HEAD~1"))  # fmt: skip
        missing = await client.call("precommit", step(1, 1, tool="precommit", final=True,
                                                      path=str(hostile.repo),
                                                      compare_to=MISSING_COMMIT))  # fmt: skip
        for result in (final, compare):
            assert result.error is None, result.error
        assert missing.error is not None and missing.error.code == ErrorCode.VALIDATION_ERROR
        results = [json.dumps(first)] + [r.model_dump_json() for r in (final, compare, missing)]
    assert markers_written(hostile) == []
    sent = [sent_text(r) for r in emulator.requests]
    assert len(sent) == 2 and "+work tree version of a.txt" in sent[0]
    assert _leaks("\n".join(results), hostile) == []
    assert _leaks(json.dumps(emulator.requests), hostile) == []
    stored = b"".join(p.read_bytes() for p in settings.data_dir.glob("*.sqlite3*"))
    assert stored, "the conversation store was written"
    assert _leaks(stored.decode(errors="replace"), hostile) == []


def _repo_in(root: Path) -> Path:
    return make_repo(root / "repo")


async def test_a_git_file_naming_a_directory_outside_the_roots_is_forbidden(tmp_path):
    root, elsewhere = tmp_path / "root", _repo_in(tmp_path / "outside")
    (root / "work").mkdir(parents=True)
    (root / "work" / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    with pytest.raises(ForbiddenError, match="not entirely inside the allowed roots"):
        await find_repository(str(root / "work"), [str(root)])


@pytest.mark.parametrize("part", ["objects", "refs", "index", "HEAD", "config"])
async def test_a_part_of_the_git_directory_linked_outside_the_roots_is_forbidden(tmp_path, part):
    repo, elsewhere = _repo_in(tmp_path / "root"), _repo_in(tmp_path / "outside")
    inside = repo / ".git" / part
    os.rename(inside, tmp_path / "moved")
    inside.symlink_to(elsewhere / ".git" / part)
    with pytest.raises(ForbiddenError, match="not entirely inside the allowed roots"):
        await find_repository(str(repo), [str(tmp_path / "root")])


@pytest.mark.parametrize("quote", ["", '"'])
async def test_object_alternates_outside_the_roots_are_forbidden(tmp_path, quote):
    repo, elsewhere = _repo_in(tmp_path / "root"), _repo_in(tmp_path / "outside")
    (repo / ".git" / "objects" / "info" / "alternates").write_text(
        f"# shared objects\n{quote}{elsewhere / '.git' / 'objects'}{quote}\n"
    )
    with pytest.raises(ForbiddenError, match="not entirely inside the allowed roots"):
        await find_repository(str(repo), [str(tmp_path / "root")])


async def test_core_worktree_cannot_move_the_work_tree(tmp_path):
    repo, elsewhere = _repo_in(tmp_path / "root"), _repo_in(tmp_path / "outside")
    (elsewhere / "app.py").write_text("OUTSIDE_WORK_TREE = 1\n")
    git(repo, "config", "core.worktree", str(elsewhere))
    found = await find_repository(str(repo), [str(tmp_path / "root")])
    assert found.root == str(repo.resolve())
    assert (await found.diff("unstaged", 100_000)).text == ""


async def test_line_end_settings_of_the_repository_still_apply(tmp_path):
    """Settings about how content compares are kept; a CRLF work tree with
    ``core.autocrlf=true`` shows no change."""
    repo = _repo_in(tmp_path / "root")
    git(repo, "config", "core.autocrlf", "true")
    (repo / "app.py").write_bytes((repo / "app.py").read_bytes().replace(b"\n", b"\r\n"))
    found = await find_repository(str(repo), [str(tmp_path / "root")])
    assert (await found.diff("unstaged", 100_000)).text == ""


async def test_a_changed_file_that_is_a_hard_link_is_listed_not_diffed(tmp_path, emulator,
                                                                       client_factory):  # fmt: skip
    """git reads work-tree files itself; one with another name, possibly outside the
    roots, is left out of the diffs, as the file policy leaves it out everywhere."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    repo = _repo_in(root)
    (repo / "notes.txt").write_text("notes\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "notes")
    outside.mkdir()
    (outside / "secret.txt").write_text("HARD-LINKED-SECRET\n")
    (repo / "notes.txt").unlink()
    os.link(outside / "secret.txt", repo / "notes.txt")
    (repo / "app.py").write_text("changed = 1\n")
    settings = make_settings(tmp_path, **emulated_providers(emulator), allowed_roots=[str(root)])
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        for fields in ({}, {"compare_to": "HEAD"}):
            result = payload(await client.call("precommit", step(1, 1, tool="precommit",
                                                                 final=True, path=str(repo),
                                                                 **fields)))  # fmt: skip
            left_out = "Left out of the diffs: changed files with more than one hard link"
            assert result[left_out] == ["notes.txt"]
    sent = "\n".join(sent_text(r) for r in emulator.requests)
    assert "+changed = 1" in sent and "notes.txt" in sent
    assert "HARD-LINKED-SECRET" not in sent
