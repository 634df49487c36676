"""The README's examples, run as written: extracted from README.md, so the front door cannot
drift from what works.

Each fenced block of the README carries a marker: ``<!-- example: NAME -->`` (run here) or
``<!-- not run: why -->``. The shell examples run line by line in one environment, as a
person pastes them into one terminal: ``export`` sets the environment, a line ending in
``&`` runs in the background (and is waited for until the port it names listens),
``kill %N`` stops the Nth of those, and ``<...>`` stands for the ``continuation_id`` the
previous command printed. The Python examples run as scripts.

The one liberty taken: the ports. On a shared machine 8079, 8078 and 8090 may be taken,
so each is replaced by a free one, in the examples' text and in the daemon's settings
(``EXAI_WS_PORT``, ``EXAI_HTTP_PORT``) alike. The user is a new one: a home directory of
their own (so the data directory and the user's settings file are new), the environment
without any exai or provider variable, a working directory with the README in it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.cli.helpers import HANG_S, free_port, listening
from tests.cli.markdown import Block, blocks

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
_CONTINUATION = re.compile(r"^continuation_id: (\S+)$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"<[^<>]+>")


def _examples() -> dict[str, Block]:
    return {b.marker[1]: b for b in blocks(README) if b.marker and b.marker[0] == "example"}


@dataclass
class Terminal:
    """One terminal's worth of state: environment, working directory, background jobs."""

    env: dict[str, str]
    cwd: Path
    ports: dict[str, str]
    jobs: list[asyncio.subprocess.Process] = field(default_factory=list)
    outputs: list[tuple[str, str, str]] = field(default_factory=list)  # (line, out, err)

    def ported(self, text: str) -> str:
        for usual, free in self.ports.items():
            text = text.replace(usual, free)
        return text

    async def run_block(self, block: Block) -> None:
        for raw in self.ported(block.text).splitlines():
            tokens = list(shlex.shlex(raw, posix=True, punctuation_chars=True))
            if not tokens:
                continue
            if tokens[0] == "export":
                for assignment in shlex.split(raw, comments=True)[1:]:
                    name, _, value = assignment.partition("=")
                    self.env[name] = value
            elif tokens[0] == "kill" and tokens[1:2] == ["%"]:
                job = self.jobs[int(tokens[2]) - 1]
                job.send_signal(signal.SIGTERM)
                await asyncio.wait_for(job.wait(), HANG_S)
            elif tokens[-1] == "&":
                await self._background(raw[: raw.rindex("&")])
            else:
                await self.run_line(raw)

    async def _background(self, command: str) -> None:
        job = await asyncio.create_subprocess_exec(
            "bash", "-c", command, env=self.env, cwd=self.cwd,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        self.jobs.append(job)
        port = re.search(r"--port (\d+)", command)
        for _ in range(int(HANG_S / 0.05)):
            if port is None or listening(int(port.group(1))):
                return
            assert job.returncode is None, f"{command!r} exited with {job.returncode}"
            await asyncio.sleep(0.05)
        raise AssertionError(f"{command!r} never listened")

    async def run_line(self, line: str) -> tuple[str, str]:
        if _PLACEHOLDER.search(line):
            last = _CONTINUATION.findall(self.outputs[-1][2])
            assert last, f"nothing to put in {line!r}: {self.outputs[-1]}"
            line = _PLACEHOLDER.sub(last[-1], line)
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", line, env=self.env, cwd=self.cwd,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), HANG_S)
        self.outputs.append((line, out.decode(), err.decode()))
        assert proc.returncode == 0, f"{line!r} exited {proc.returncode}: {err.decode()}"
        return out.decode(), err.decode()

    async def run_python(self, block: Block) -> str:
        script = self.cwd / "example.py"
        script.write_text(self.ported(block.text))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env=self.env, cwd=self.cwd,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), HANG_S)
        assert proc.returncode == 0, err.decode()
        return out.decode()

    async def quietly(self, line: str) -> None:
        """Run ``line`` whatever it answers (cleaning up after a failed test)."""
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", line, env=self.env, cwd=self.cwd,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await asyncio.wait_for(proc.wait(), HANG_S)

    async def close(self) -> None:
        for job in self.jobs:
            if job.returncode is None:
                job.kill()
                await job.wait()


def _new_user(tmp_path: Path) -> Terminal:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    shutil.copy(ROOT / "README.md", work / "README.md")
    # `.venv/bin/...` as in a checkout after `make setup`: the environment running this test.
    (work / ".venv").symlink_to(sys.prefix)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("EXAI_", "KIMI_", "MOONSHOT_", "GLM_", "ZAI_", "ZHIPUAI_",
                                "SUPABASE_", "XDG_"))}  # fmt: skip
    ports = {"8079": str(free_port()), "8078": str(free_port()), "8090": str(free_port())}
    env.update(HOME=str(home), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
               EXAI_WS_PORT=ports["8079"], EXAI_HTTP_PORT=ports["8078"])  # fmt: skip
    return Terminal(env, work, ports)


def test_every_block_of_the_readme_is_an_example_or_says_why_it_is_not_run():
    unmarked = [b.line for b in blocks(README) if b.marker is None]
    assert unmarked == []
    assert set(_examples()) == {"keyless", "cli", "token", "openai", "client"}


async def test_the_keyless_path_and_the_examples_run_as_written(tmp_path: Path):
    examples = _examples()
    term = _new_user(tmp_path)
    try:
        await term.run_block(examples["keyless"])
        detached, (_, first, first_err), (_, second, _), stopped = term.outputs
        assert "runs in the background" in detached[2]
        assert "Explain WAL mode in SQLite" in first and "(saw 2 messages)" in first
        assert _CONTINUATION.search(first_err)
        assert "and its downsides?" in second and "(saw 4 messages)" in second  # turn 2 saw turn 1
        assert "stopped the daemon" in stopped[2] and not listening(int(term.ports["8079"]))
        assert term.jobs[0].returncode is not None  # `kill %1` stopped the emulator

        # The other examples, against a daemon and emulator started the same way.
        keyless = examples["keyless"].text.splitlines()
        await term.run_block(Block("sh", "\n".join(keyless[:4]) + "\n", None, 0))
        term.outputs.clear()
        await term.run_block(examples["cli"])
        listed, described, with_file, streamed, reviewed = term.outputs
        assert "chat" in listed[1] and "arguments: prompt*" in listed[1]
        assert re.search(r"^\s+prompt\s+\(string, required\)", described[1], re.MULTILINE)
        assert "(saw 3 messages)" in with_file[1]  # the README went along as a file
        assert "Explain WAL mode in SQLite" in streamed[1]
        assert "emulated reply" in reviewed[1]
        assert "emulated reply" in await term.run_python(examples["openai"])
        client_out = await term.run_python(examples["client"])
        assert "emulated reply" in client_out and "continuation_id: " in client_out
    finally:
        await term.quietly("exai stop")
        await term.close()


async def test_the_token_example_can_use_the_openai_and_client_examples(tmp_path: Path):
    """The README's scoped token reaches /v1 (the `completion` tool) and `chat`."""
    examples = _examples()
    term = _new_user(tmp_path)
    term.env["EXAI_JWT_SECRET"] = "readme-example-secret-0123456789abcdef"
    keyless = examples["keyless"].text.splitlines()
    try:
        await term.run_block(Block("sh", "\n".join(keyless[:4]) + "\n", None, 0))
        term.outputs.clear()
        await term.run_block(examples["token"])
        term.env["EXAI_WS_TOKEN"] = term.outputs[-1][1].strip()
        await term.run_line("exai tools --json")
        listed = {tool["name"] for tool in json.loads(term.outputs[-1][1])}
        assert listed == {"chat", "codereview"}  # completion is callable, never listed
        assert "emulated reply" in await term.run_python(examples["openai"])
        assert "continuation_id: " in await term.run_python(examples["client"])
    finally:
        await term.quietly("exai stop")
        await term.close()
