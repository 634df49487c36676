"""Attacks through the programs exai starts: git in precommit, and bridged MCP servers.

One ``exai serve`` process whose environment holds provider keys, a WebSocket
token, a JWT secret, a database URL, credentials of other programs and ``GIT_*``
variables that would make any git started with them run a hostile program. Its
only allowed root is a project holding:

* the hostile repository of ``tests/hostile_git.py``: every git setting that names a
  program points at one, files route through filters from every attributes source
  and through included configuration, a submodule has a hostile configuration of
  its own, and promisor remotes would fetch a missing commit through helpers;
* repositories that reach outside the root: a ``.git`` file or symlink naming a git
  directory elsewhere, objects, refs, index, ``HEAD`` or config linked out, object
  alternates (plain and quoted) elsewhere, ``core.worktree`` pointing elsewhere, a
  changed file that is a hard link to a file elsewhere;

and a servers file with a stdio MCP server that writes down the environment it was
started with. ``precommit`` is called against each repository, every way it reads
changes. Every hostile program leaves a marker when it runs and prints the secrets
when its output is used. Checked: no marker is ever written; no secret reaches a
result, the provider, the conversation store, the audit outbox or the log; the
repositories reaching outside are refused with ``FORBIDDEN`` (``core.worktree`` is
ignored instead, the hard-linked file left out of the diff) and nothing from outside
is read; the MCP server's environment
holds none of the daemon's secrets.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exai.client import ExaiClient
from exai.emulators.provider import EmulatorServer
from exai.protocol import CallToolResult, ErrorCode
from tests.hostile_git import (
    FILES,
    HOOKS,
    PROGRAM_SETTINGS_IN_ALL,
    Hostile,
    build_hostile_repo,
    git_env_attacks,
    markers_written,
)
from tests.reliability.harness import DaemonProcess, provider_env, scaled, wait_until
from tests.tools.workflow_helpers import git, make_repo

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

TOKEN = "ws-token-attack-subprocess-Z8q2"
SECRETS = {
    "EXAI_WS_TOKEN": TOKEN,
    "EXAI_JWT_SECRET": "jwt-secret-attack-subprocess-" + "j" * 40,
    "EXAI_AUDIT_POSTGRES_URL": "postgresql://exai:db-secret-attack-Q4w7@127.0.0.1:1/audit",
    "SUPABASE_SERVICE_ROLE_KEY": "sb-secret-attack-subprocess-P1o9",
}
KIMI_KEY = "sk-kimi-attack-subprocess-M3n6"
GLM_KEY = "glm-attack-subprocess-V5c8"
FOREIGN = {  # what a shell or an IDE holds for other programs
    "GITHUB_TOKEN": "ghp-attack-subprocess-foreign-T2y4",
    "AWS_SECRET_ACCESS_KEY": "aws-attack-subprocess-foreign-R7u1",
    "DATABASE_URL": "postgresql://u:foreign-db-secret-K9i3@db/app",
}
MISSING_COMMIT = "0123456789abcdef0123456789abcdef01234567"
SECTION = "attack_subprocess"


@dataclass
class World:
    root: Path
    outside: Path
    hostile: Hostile
    outside_marker: str  # in every file outside the root
    escapes: list[tuple[str, Path, set[ErrorCode] | None]]  # (name, repository, expected)
    env_dump: Path  # where the MCP server writes the environment it got

    @property
    def secrets(self) -> list[str]:
        return [*SECRETS.values(), KIMI_KEY, GLM_KEY, *FOREIGN.values(), self.hostile.secret,
                self.outside_marker]  # fmt: skip


def _escaping_repositories(root: Path, outside: Path, marker: str) -> list[Any]:
    elsewhere = make_repo(outside / "elsewhere")
    (elsewhere / "app.py").write_text(f"# {marker}\n")
    git(elsewhere, "commit", "-qam", f"outside {marker}")
    forbidden = {ErrorCode.FORBIDDEN}
    escapes: list[tuple[str, Path, set[ErrorCode] | None]] = []

    def repo(name: str) -> Path:
        path = make_repo(root / "escapes" / name)
        (path / "app.py").write_text("changed = 1\n")
        return path

    gitfile = root / "escapes" / "gitfile"
    gitfile.mkdir(parents=True)
    (gitfile / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    escapes.append((".git file naming a git directory outside", gitfile, forbidden))
    gitlink = root / "escapes" / "gitlink"
    gitlink.mkdir(parents=True)
    (gitlink / ".git").symlink_to(elsewhere / ".git", target_is_directory=True)
    escapes.append((".git symlink to a git directory outside", gitlink, forbidden))
    for part in ("objects", "refs", "index", "HEAD", "config"):
        path = repo(f"{part.lower()}-linked")
        shutil.move(path / ".git" / part, path / f"moved-{part}")
        (path / ".git" / part).symlink_to(elsewhere / ".git" / part)
        escapes.append((f"{part} linked outside", path, forbidden))
    for quote in ("", '"'):
        path = repo(f"alternates{'-quoted' if quote else ''}")
        (path / ".git" / "objects" / "info" / "alternates").write_text(
            f"{quote}{elsewhere / '.git' / 'objects'}{quote}\n"
        )
        escapes.append((f"object alternates outside{' (quoted)' if quote else ''}", path,
                        forbidden))  # fmt: skip
    path = repo("worktree")
    git(path, "config", "core.worktree", str(elsewhere))
    escapes.append(("core.worktree outside (ignored)", path, None))
    path = repo("hard-linked")
    (path / "app.py").unlink()
    os.link(elsewhere / "app.py", path / "app.py")
    escapes.append(("a changed file hard-linked to one outside (left out)", path, None))
    return escapes


def _env_dumping_server(directory: Path) -> tuple[Path, Path]:
    """A servers file with one stdio server that writes its environment and exits."""
    dump = directory / "server-env.json"
    script = directory / "env_server.py"
    script.write_text(
        "import json, os, sys\n"
        "with open(sys.argv[1], 'a') as f:\n"
        "    f.write(json.dumps(dict(os.environ)) + '\\n')\n"
    )
    servers = directory / "mcp_servers.json"
    servers.write_text(json.dumps({"mcpServers": {"envdump": {
        "command": sys.executable, "args": [str(script), str(dump)],
        "env": {"SERVER_SETTING": "configured"},
    }}}))  # fmt: skip
    return servers, dump


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    workdir = tmp_path_factory.mktemp("attack-subprocess")
    root, outside = workdir / "project", workdir / "outside"
    root.mkdir()
    hostile = build_hostile_repo(root, outside)
    marker = f"OUTSIDE-CONTENT-{os.urandom(6).hex()}"
    escapes = _escaping_repositories(root, outside, marker)
    return World(root, outside, hostile, marker, escapes, workdir / "server-env.json")


@pytest.fixture(scope="module")
def daemon(world: World, provider_emulator: EmulatorServer) -> Iterator[DaemonProcess]:
    servers, _ = _env_dumping_server(world.root.parent)
    process = DaemonProcess(
        world.root.parent,
        EXAI_ALLOWED_ROOTS=str(world.root),
        EXAI_TOOL_PROFILE="full",
        EXAI_RATE_LIMIT_PER_MIN="0",
        EXAI_LOG_LEVEL="debug",
        EXAI_MCP_SERVERS_FILE=str(servers),
        EXAI_BRIDGE_RETRY_MAX_S="0.5",
        **provider_env(provider_emulator, KIMI_KEY, GLM_KEY),
        **SECRETS,
        **FOREIGN,
        **git_env_attacks(world.hostile),
    ).start()
    yield process
    process.stop()


def _step(path: Path, number: int = 1, total: int = 1, **fields: Any) -> dict[str, Any]:
    return {
        "step": f"review step {number}", "step_number": number, "total_steps": total,
        "next_step_required": number < total, "findings": "reading the changes",
        "path": str(path), **fields,
    }  # fmt: skip


def _round(hostile: Hostile) -> list[tuple[str, dict[str, Any], ErrorCode | None]]:
    """One round of precommit calls against the hostile repository: every way it reads."""
    repo = hostile.repo
    return [
        ("list the changes (step 1 of 2)", _step(repo, 1, 2), None),
        ("staged and unstaged diff to the model", _step(repo), None),
        ("staged diff only", _step(repo, include_unstaged=False), None),
        ("unstaged diff only", _step(repo, include_staged=False), None),
        ("diff against HEAD~1", _step(repo, compare_to="HEAD~1"), None),
        ("a commit only a promisor remote has", _step(repo, compare_to=MISSING_COMMIT),
         ErrorCode.VALIDATION_ERROR),
        ("the hostile submodule as a repository", _step(repo / "sub"), None),
    ]  # fmt: skip


async def _call(
    client: ExaiClient, emulator: EmulatorServer, arguments: dict[str, Any]
) -> tuple[CallToolResult, str]:
    seen = len(emulator.requests)
    result = await client.call("precommit", arguments, wait_s=120)
    sent = json.dumps([r["body"] for r in emulator.requests[seen:]])
    return result, sent + result.model_dump_json()


async def test_precommit_on_a_hostile_repository_runs_nothing(
    daemon: DaemonProcess, world: World, emulator: EmulatorServer, figures
) -> None:
    rounds = scaled(10)
    failures: list[str] = []
    outcomes: dict[str, int] = {}
    reached_model = 0
    async with ExaiClient(daemon.url, TOKEN) as client:
        for _ in range(rounds):
            for name, arguments, expected in _round(world.hostile):
                result, seen = await _call(client, emulator, arguments)
                code = result.error.code if result.error else None
                outcomes[str(code or "ok")] = outcomes.get(str(code or "ok"), 0) + 1
                if code != expected:
                    failures.append(f"{name}: {code} ({result.error}), expected {expected}")
                if leaked := [s[:16] for s in world.secrets if s in seen]:
                    failures.append(f"{name}: LEAKED {leaked}")
                if "+work tree version of a.txt" in seen:
                    reached_model += 1
    markers = markers_written(world.hostile)
    figures.record(
        SECTION,
        git_settings_naming_a_program=PROGRAM_SETTINGS_IN_ALL,
        hooks_installed=len(HOOKS) * 2,
        attribute_sources=4,  # .gitattributes, info/attributes, core.attributesFile, includes
        git_env_variables=len(git_env_attacks(world.hostile)),
        precommit_calls=sum(outcomes.values()),
        precommit_outcomes=dict(sorted(outcomes.items())),
        diffs_that_reached_the_model=reached_model,
        hostile_programs_run=len(markers),
    )
    assert markers == [], markers
    assert reached_model >= rounds, "the real diff must still reach the model"
    assert failures == [], "\n".join(failures[:20])
    assert len(FILES) == 8


async def test_repositories_reaching_outside_the_root_are_refused(
    daemon: DaemonProcess, world: World, emulator: EmulatorServer, figures
) -> None:
    failures: list[str] = []
    async with ExaiClient(daemon.url, TOKEN) as client:
        for name, repo, expected in world.escapes:
            for arguments in (_step(repo, 1, 2), _step(repo), _step(repo, compare_to="HEAD")):
                result, seen = await _call(client, emulator, arguments)
                code = result.error.code if result.error else None
                if (code is None) != (expected is None) or (expected and code not in expected):
                    failures.append(f"{name}: {code} ({result.error}), expected {expected}")
                if world.outside_marker in seen:
                    failures.append(f"{name}: content from outside the root was read")
                figures.add(SECTION, "escaping_repository_calls")
    figures.record(SECTION, escaping_repositories=len(world.escapes))
    figures.sections[SECTION].setdefault("outside_content_read", 0)
    figures.add(SECTION, "outside_content_read", sum("outside the root was read" in f
                                                     for f in failures))  # fmt: skip
    assert failures == [], "\n".join(failures)


async def test_a_bridged_server_gets_none_of_the_daemons_environment(
    daemon: DaemonProcess, world: World, figures
) -> None:
    # The server exits at once, so the bridge keeps starting it: each start is a sample.
    await wait_until(lambda: world.env_dump.exists() and
                     len(world.env_dump.read_text().splitlines()) >= 3, 60,
                     "the bridged server started three times")  # fmt: skip
    starts = [json.loads(line) for line in world.env_dump.read_text().splitlines()]
    allowed = {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SERVER_SETTING",
               "LOGNAME", "SHELL", "TERM", "USER"}  # fmt: skip
    extra = sorted({k for env in starts for k in env} - allowed)
    leaked = sorted({s[:16] for env in starts for s in world.secrets if s in json.dumps(env)})
    figures.record(
        SECTION,
        bridged_server_starts_inspected=len(starts),
        bridged_server_variables_beyond_the_minimal_set=len(extra),
        bridged_server_secrets_seen=len(leaked),
    )
    assert all(env.get("SERVER_SETTING") == "configured" for env in starts)
    home = str(daemon.data_dir / "mcp-servers" / "home")
    assert all(env["HOME"] == home for env in starts), "a private home, not the user's"
    assert extra == [] and leaked == [], (extra, leaked)


async def test_no_secret_in_the_store_the_outbox_or_the_log(
    daemon: DaemonProcess, world: World, figures
) -> None:
    assert daemon.stop() == 0
    stored = b"".join(p.read_bytes() for p in daemon.data_dir.glob("*.sqlite3*"))
    places = {"store and outbox": stored.decode(errors="replace"), "log": daemon.log_text()}
    found = [f"{s[:16]} in {where}" for s in world.secrets for where, text in places.items()
             if s in text]  # fmt: skip
    problems = daemon.log_problems()
    figures.record(
        SECTION,
        secrets_searched=len(world.secrets),
        secrets_found=len(found),
        hostile_programs_run=len(markers_written(world.hostile)),
    )
    assert stored, "the conversation store was written"
    assert found == [], found
    assert markers_written(world.hostile) == []
    assert [p for p in problems if "envdump" not in json.dumps(p)] == [], problems[:5]
