"""The one helper every child process goes through: what environment each child gets,
what configuration git sees, and that no child is started any other way."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from exai.subprocesses import (
    NO_HOME,
    child_environment,
    daemon_environment,
    parse_config_list,
    worker_environment,
)
from exai.tools.workflow.git import _git, find_repository
from tests.hostile_git import build_hostile_repo

SRC = Path(__file__).resolve().parents[1] / "src"
SECRETS = {
    "KIMI_API_KEY": "sk-kimi-child-secret",
    "GLM_API_KEY": "glm-child-secret",
    "EXAI_WS_TOKEN": "ws-child-secret",
    "EXAI_STORE_URL": "postgresql://u:child-secret@db/x",
    "SUPABASE_SERVICE_ROLE_KEY": "sb-child-secret",
}
FOREIGN = {  # what an IDE or a shell may hold for other programs
    "GITHUB_TOKEN": "ghp-foreign",
    "DATABASE_URL": "postgresql://u:foreign@db/y",
    "AWS_SECRET_ACCESS_KEY": "aws-foreign",
    "GIT_CONFIG_PARAMETERS": "'core.pager'='sh -c evil'",
    "LD_PRELOAD": "/tmp/evil.so",
    "PYTHONSTARTUP": "/tmp/evil.py",
}


@pytest.fixture
def polluted(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SECRETS, **FOREIGN, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}.items():
        monkeypatch.setenv(name, value)


def test_a_child_gets_path_a_harmless_home_the_locale_and_tmpdir_only(polluted):
    env = child_environment()
    assert set(env) <= {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR"}
    assert env["HOME"] == NO_HOME and env["LANG"] == "C.UTF-8" and env["TMPDIR"] == "/tmp"
    assert env["PATH"]


def test_what_a_caller_adds_is_added_in_the_open(polluted, tmp_path):
    env = child_environment(home=tmp_path, extra={"SERVER_SETTING": "1"})
    assert env["HOME"] == str(tmp_path) and env["SERVER_SETTING"] == "1"
    assert not set(SECRETS) & set(env)


def test_exais_own_daemon_gets_exais_settings_and_nothing_foreign(polluted, monkeypatch):
    monkeypatch.setenv("exai_log_level", "debug")  # settings are matched in any case
    monkeypatch.setenv("MOONSHOT_API_KEY", "sk-moonshot")  # a vendor's name for a setting
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    env = daemon_environment({"EXAI_WS_TOKEN": "from-the-shim"})
    assert {k: env[k] for k in SECRETS if k != "EXAI_WS_TOKEN"} == {
        k: v for k, v in SECRETS.items() if k != "EXAI_WS_TOKEN"
    }
    assert env["EXAI_WS_TOKEN"] == "from-the-shim"
    assert env["exai_log_level"] == "debug" and env["MOONSHOT_API_KEY"] == "sk-moonshot"
    assert env["HTTPS_PROXY"] == "http://proxy.invalid:3128"
    assert env["HOME"] != NO_HOME
    assert not set(FOREIGN) & set(env)


def test_a_worker_gets_the_runtime_but_no_setting_and_no_foreign_variable(monkeypatch):
    # The audit writer: exai, so it gets what exai's runtime reads (its home, proxies),
    # but its settings and credentials come over a pipe, never through its environment.
    for name, value in {**SECRETS, **FOREIGN}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    env = worker_environment()
    assert env["HTTPS_PROXY"] == "http://proxy.invalid:3128" and env["HOME"] != NO_HOME
    assert not (set(SECRETS) | set(FOREIGN)) & set(env)
    assert not any(value in SECRETS.values() for value in env.values())


def test_only_plain_content_settings_are_copied_from_a_repository():
    listed = b"\0".join([
        b"core.autocrlf\ninput", b"core.filemode\nfalse", b"core.symlinks",
        b"extensions.objectformat\nsha256", b"core.eol\nlf\n[filter \"x\"]\n\tclean = evil",
        b"core.ignorecase\ntrue; evil", b"filter.x.clean\nevil", b"core.pager\nevil",
        b"include.path\n/elsewhere", b"core.worktree\n/elsewhere", b"",
    ])  # fmt: skip
    assert parse_config_list(listed) == {
        "core.autocrlf": "input",
        "core.filemode": "false",
        "core.symlinks": "true",
        "extensions.objectformat": "sha256",
    }


async def test_git_sees_exais_configuration_and_no_other(tmp_path, polluted):
    hostile = build_hostile_repo(tmp_path / "root", tmp_path / "outside")
    repo = await find_repository(str(hostile.repo), [str(tmp_path / "root")])
    out = await _git(repo._sealed, ("config", "--list", "--show-origin", "-z"), 100_000)
    entries = [e.split("\0", 1) for e in out.stdout.decode().split("\0file:")]
    origins = {e[0].removeprefix("file:") for e in entries}
    keys = {e[1].split("\n", 1)[0] for e in entries}
    assert len(origins) == 1 and Path(origins.pop()).parent.name.startswith("exai-git-")
    assert keys == {
        "core.repositoryformatversion", "core.bare", "core.quotepath", "core.attributesfile",
        "core.excludesfile", "core.filemode", "diff.ignoresubmodules", "color.ui",
    }  # fmt: skip
    env = await _git(repo._sealed, ("var", "GIT_EDITOR"), 10_000)
    assert env.stdout.strip() in (b"", b"vi", b"editor"), "no editor comes from the repository"


# How a child can be started, as (module, function); a bare name has module "".
_STARTERS = {
    *(("subprocess", n) for n in ("Popen", "run", "call", "check_call", "check_output")),
    ("asyncio", "create_subprocess_exec"), ("anyio", "open_process"),
    ("", "StdioServerParameters"),
}  # fmt: skip
# Ways that cannot take an environment, or go through a shell: never used.
_REFUSED = {
    *(("os", n) for n in ("system", "popen", "posix_spawn", "posix_spawnp", "execv", "execve",
                          "execvp", "execvpe", "execl", "execle", "execlp", "execlpe",
                          "spawnv", "spawnve", "spawnl", "spawnle", "startfile")),
    ("asyncio", "create_subprocess_shell"),
}  # fmt: skip


def _callee(call: ast.Call) -> tuple[str, str]:
    func = call.func
    if isinstance(func, ast.Attribute):
        return getattr(func.value, "id", ""), func.attr
    return "", getattr(func, "id", "")


def test_every_child_process_in_src_gets_its_environment_from_the_helper():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        for call in (n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call)):
            where = f"{path.relative_to(SRC)}:{call.lineno}"
            assert _callee(call) not in _REFUSED, f"{where}: {ast.unparse(call.func)}"
            if _callee(call) not in _STARTERS:
                continue
            env = next((k.value for k in call.keywords if k.arg == "env"), None)
            assert env is not None, f"{where}: a child started without env= inherits everything"
            assert "os.environ" not in ast.unparse(env), f"{where}: env= passes os.environ on"
            assert "exai.subprocesses" in text, f"{where}: env= not from exai.subprocesses"
            found.append(where)
    # The places that start children today; a new one shows up here to be looked at.
    assert {f.split(":")[0] for f in found} == {
        "tools/workflow/git.py", "shim/autostart.py", "bridge/link.py", "emulators/postgres.py",
        "emulators/haproxy.py", "audit/link.py", "tracing/link.py", "store/session_writer.py",
    }, json.dumps(found)  # fmt: skip
