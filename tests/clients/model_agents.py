"""The real agents with exai as their model, headless, each configured as docs/agents.md says.

A TEST DRIVER. Each agent runs with its own ``HOME`` (nothing of the
developer's configuration is read) against ``base_url``, the test daemon's HTTP
port (or a recorder in front of it), in place of docs/agents.md's
``http://127.0.0.1:8078``. Anything an agent would fetch from the internet
(updates, model catalogues, telemetry) is refused: its proxy is a closed port on
loopback, and the agents that have a switch for it are told not to try.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.clients.daemon import DOC_TOKEN
from tests.clients.install import claude_binary, codex_binary, opencode_binary, qwen_command

__all__ = [
    "DOC",
    "AgentRun",
    "claude_env",
    "codex_env",
    "run_claude",
    "run_codex",
    "run_opencode",
    "run_qwen",
    "snippets",
]

DOC = Path(__file__).parents[2] / "docs" / "agents.md"
DOC_URL = "http://127.0.0.1:8078"
# Port 9 (discard) on loopback: nothing listens, so a proxied connection is refused.
_NO_NETWORK = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}


def snippets() -> dict[str, tuple[str, str]]:
    """docs/agents.md's marked snippets: name -> (language, body)."""
    found = re.findall(r"<!-- snippet: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", DOC.read_text(), re.S)
    return {name: (lang, body) for name, lang, body in found}


def _exported(name: str) -> dict[str, str]:
    _, body = snippets()[name]
    return dict(re.findall(r"^export (\w+)=(.*)$", body, re.M))


@dataclass(frozen=True)
class AgentRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def shown(self) -> str:
        """Everything the agent printed, as its user reads it."""
        return self.stdout + self.stderr


def _run(argv: list[str], env: dict[str, str], project: Path, timeout_s: float) -> AgentRun:
    """Run the agent in a process group of its own: qwen-code runs itself again as a
    child, which a timeout must end too."""
    proc = subprocess.Popen(argv, env=env, cwd=project, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever it left running
    return AgentRun(proc.returncode, stdout, stderr)


def _base_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "LANG": "C.UTF-8"}


# --- Claude Code, on /v1/messages ------------------------------------------------------------


def claude_env(home: Path, base_url: str, **extra: str) -> dict[str, str]:
    exported = _exported("claude-code-model")
    assert exported["ANTHROPIC_BASE_URL"] == DOC_URL
    assert exported["ANTHROPIC_API_KEY"] == DOC_TOKEN
    return {
        **_base_env(home),
        **exported,
        "ANTHROPIC_BASE_URL": base_url,
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **extra,
    }


def run_claude(
    project: Path, env: dict[str, str], prompt: str, *extra: str, timeout_s: float = 180
) -> AgentRun:
    argv = [str(claude_binary()), "-p", prompt, "--output-format", "json",
            "--allowedTools", "Read", *extra]  # fmt: skip
    return _run(argv, env, project, timeout_s)


# --- Codex, on /v1/responses -----------------------------------------------------------------


def codex_env(home: Path, base_url: str) -> dict[str, str]:
    """Codex's environment, its ``config.toml`` written from docs/agents.md's snippet."""
    _, body = snippets()["codex-model"]
    config = tomllib.loads(body)
    assert config["model_providers"]["exai"]["base_url"] == f"{DOC_URL}/v1"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    text = body.replace(f"{DOC_URL}/v1", base_url + "/v1")
    (codex_home / "config.toml").write_text(
        text + "\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n"
    )
    return {**_base_env(home), "CODEX_HOME": str(codex_home), "EXAI_TOKEN": DOC_TOKEN,
            **_NO_NETWORK}  # fmt: skip


def run_codex(
    project: Path, env: dict[str, str], prompt: str, timeout_s: float = 180, *,
    resume: bool = False, keep: bool = False,
) -> AgentRun:  # fmt: skip
    """``codex exec`` on ``prompt``; ``keep`` writes the session to CODEX_HOME (not
    ``--ephemeral``) and ``resume`` goes on with the last one (``exec resume --last``,
    which takes the project from the working directory)."""
    options = ["--json", "--strict-config", "--skip-git-repo-check"]
    if resume:
        argv = [str(codex_binary()), "exec", "resume", "--last", *options, prompt]
    else:
        argv = [str(codex_binary()), "exec", *options, *([] if keep else ["--ephemeral"]),
                "--cd", str(project), prompt]  # fmt: skip
    return _run(argv, env, project, timeout_s)


# --- qwen-code and opencode, on /v1/chat/completions -----------------------------------------


def run_qwen(
    project: Path, home: Path, base_url: str, prompt: str, timeout_s: float = 180
) -> AgentRun:
    """``qwen --auth-type openai`` with docs/agents.md's ``OPENAI_*`` variables."""
    exported = _exported("openai-agent")
    assert exported["OPENAI_BASE_URL"] == f"{DOC_URL}/v1"
    node, entry = qwen_command()
    env = {
        **_base_env(home),
        **exported,
        "OPENAI_BASE_URL": base_url + "/v1",
        "PATH": f"{Path(node).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        **_NO_NETWORK,
    }
    return _run([node, entry, "--auth-type", "openai", prompt], env, project, timeout_s)


def run_opencode(
    project: Path, home: Path, base_url: str, prompt: str, timeout_s: float = 180
) -> AgentRun:
    """``opencode run`` with docs/agents.md's ``opencode.json`` as its global configuration."""
    _, body = snippets()["opencode-model"]
    config = json.loads(body)
    options = config["provider"]["exai"]["options"]
    assert options["baseURL"] == f"{DOC_URL}/v1"
    options["baseURL"] = base_url + "/v1"
    config_dir = home / ".config" / "opencode"
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "opencode.json").write_text(json.dumps(config))
    env = {
        **_base_env(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "EXAI_TOKEN": DOC_TOKEN,
        # What it would otherwise fetch: models.dev's catalogue, updates, its plugins.
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        **_NO_NETWORK,
    }
    return _run([str(opencode_binary()), "run", "--pure", prompt], env, project, timeout_s)
