"""``precommit`` against real git repositories: it reads the changes itself."""

from __future__ import annotations

import pytest

from exai.protocol import ErrorCode
from exai.tools.workflow import precommit
from tests.conftest import emulated_providers, make_settings, running_daemon
from tests.tools.workflow_helpers import git, make_repo, payload, sent_text, step


@pytest.fixture
def settings(tmp_path, emulator):
    return make_settings(tmp_path, **emulated_providers(emulator))


@pytest.fixture
def repo(tmp_path):
    """A repository with a staged new file and an unstaged edit, and a tag ``base``
    one commit behind HEAD."""
    path = make_repo(tmp_path / "repo")
    git(path, "tag", "base")
    (path / "app.py").write_text(
        "def greet(name):\n    return 'hello ' + name\n\nCOMMITTED_MARK = 1\n"
    )
    git(path, "commit", "-q", "-am", "second")
    (path / "app.py").write_text(
        "def greet(name):\n    return 'hello ' + name\n\nCOMMITTED_MARK = 1\nWORKTREE_MARK = 2\n"
    )
    (path / "new.py").write_text("INDEXED_MARK = 3\n")
    git(path, "add", "new.py")
    (path / "scratch.txt").write_text("UNTRACKED_MARK\n")
    return path


def single(repo, **fields):
    return step(1, 1, final=True, tool="precommit", path=str(repo), **fields)


@pytest.mark.parametrize(
    ("fields", "present", "absent"),
    [
        ({"include_unstaged": False}, ["+INDEXED_MARK", "git diff --cached"],
         ["+WORKTREE_MARK", "+COMMITTED_MARK"]),
        ({"include_staged": False}, ["+WORKTREE_MARK", "Unstaged changes"],
         ["+INDEXED_MARK", "+COMMITTED_MARK"]),
        ({}, ["+INDEXED_MARK", "+WORKTREE_MARK"], ["+COMMITTED_MARK"]),
        ({"compare_to": "base"}, ["+COMMITTED_MARK", "+WORKTREE_MARK", "+INDEXED_MARK",
                                  "Changes against base"], []),
    ],
)  # fmt: skip
async def test_the_diff_reaches_the_expert(fields, present, absent, settings, repo, emulator,
                                           client_factory):  # fmt: skip
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        result = payload(await client.call("precommit", single(repo, **fields)))
    assert len(emulator.requests) == 1
    sent = sent_text(emulator.requests[0])
    for text in present:
        assert text in sent, text
    for text in absent:
        assert text not in sent, text
    assert "UNTRACKED_MARK" not in sent
    assert "scratch.txt" in result["changes"]["untracked (not reviewed)"]
    assert result["repository"] == str(repo.resolve())


async def test_intermediate_steps_list_changes_without_a_model_call(settings, repo, emulator,
                                                                    client_factory):  # fmt: skip
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        first = payload(await client.call("precommit", step(1, 2, tool="precommit",
                                                            path=str(repo))))  # fmt: skip
        assert first["changes"]["staged"] == ["A\tnew.py"]
        assert first["changes"]["unstaged"] == ["M\tapp.py"]
        assert emulator.requests == []
        await client.call("precommit", step(2, 2, tool="precommit", final=True, path=str(repo),
                                            cid=first["continuation_id"],
                                            findings="LOOKS-FINE"))  # fmt: skip
    assert len(emulator.requests) == 1
    sent = sent_text(emulator.requests[0])
    assert "LOOKS-FINE" in sent and "+INDEXED_MARK = 3" in sent and "+WORKTREE_MARK = 2" in sent


async def test_a_large_diff_is_cut_and_says_so(settings, repo, emulator, client_factory,
                                               monkeypatch):  # fmt: skip
    monkeypatch.setattr(precommit, "MAX_DIFF_BYTES", 2000)
    (repo / "app.py").write_text("".join(f"LINE_{i} = {i}\n" for i in range(5000)))
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        result = await client.call("precommit", single(repo, include_staged=False))
        assert result.error is None, result.error
        assert result.metadata.diff_truncated is True
    sent = sent_text(emulator.requests[0])
    assert "[truncated" in sent and "LINE_4999" not in sent


async def test_a_directory_that_is_not_a_repository_is_refused(settings, tmp_path, emulator,
                                                               client_factory):  # fmt: skip
    plain = tmp_path / "plain"
    plain.mkdir()
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        result = await client.call("precommit", single(plain))
        assert result.error.code == ErrorCode.VALIDATION_ERROR
        assert "not a git repository" in result.error.message
    assert emulator.requests == []


async def test_a_repository_above_the_roots_is_not_used(tmp_path, emulator, client_factory):
    outer = make_repo(tmp_path / "outer")
    inner = outer / "inner"
    inner.mkdir()
    (inner / "code.py").write_text("x = 1\n")
    settings = make_settings(tmp_path, **emulated_providers(emulator),
                             allowed_roots=[str(inner)])  # fmt: skip
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        result = await client.call("precommit", single(inner))
        assert result.error.code == ErrorCode.VALIDATION_ERROR
        assert "not a git repository" in result.error.message
    assert emulator.requests == []


@pytest.mark.parametrize(
    ("path", "fields", "code", "words"),
    [
        ("relative/repo", {}, ErrorCode.VALIDATION_ERROR, "not absolute"),
        ("/etc", {}, ErrorCode.FORBIDDEN, "outside the allowed roots"),
        ("{repo}/../../..", {}, ErrorCode.FORBIDDEN, "outside the allowed roots"),
        ("{repo}", {"compare_to": "no-such-branch"}, ErrorCode.VALIDATION_ERROR, "not a commit"),
        ("{repo}", {"compare_to": "--output=/tmp/x"}, ErrorCode.VALIDATION_ERROR, "compare_to"),
        ("{repo}", {"include_staged": False, "include_unstaged": False},
         ErrorCode.VALIDATION_ERROR, "nothing to review"),
    ],
)  # fmt: skip
async def test_bad_repository_arguments(path, fields, code, words, settings, repo, emulator,
                                        client_factory):  # fmt: skip
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        result = await client.call("precommit", single(path.format(repo=repo), **fields))
        assert result.error is not None and result.error.code == code, result.error
        assert words in result.error.message
    assert emulator.requests == []


async def test_a_symlink_to_a_repository_outside_the_roots_is_refused(tmp_path, emulator,
                                                                      client_factory):  # fmt: skip
    root = tmp_path / "root"
    root.mkdir()
    elsewhere = make_repo(tmp_path / "elsewhere")
    (root / "linked").symlink_to(elsewhere, target_is_directory=True)
    settings = make_settings(root, **emulated_providers(emulator))
    async with running_daemon(settings) as daemon:
        client = await client_factory(daemon)
        result = await client.call("precommit", single(root / "linked"))
        assert result.error.code == ErrorCode.FORBIDDEN
    assert emulator.requests == []
