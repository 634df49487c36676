"""Wrong tokens through ``exai shim``: every one must be visible where clients look.

The attack run's finding: with a wrong token the shim answered ``initialize``
and failed only ``tools/list``, which some clients show as a connected server
with no tools. Here each kind of wrong credential (a random string, none, a JWT
signed with another secret, an expired JWT, a JWT with a claim of the wrong
type, another daemon's token) is given to the shim, and two clients of the MCP
Python SDK start it:

- a handshake-era ``ClientSession``: its ``initialize`` must fail with the
  ``UNAUTHORIZED`` message;
- a 2026-07-28 ``Client`` (no handshake): listing must fail with the message,
  and a call must be an error result carrying it.

A right token, given the same way, must work (the control). The daemon's
failed-login throttle is widened for this run: it is tested on its own, and
here every refusal must be the token's.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import jwt
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from exai.auth import issue_token
from tests.reliability.harness import DaemonProcess, scaled
from tests.shim.helpers import mcp_session, shim_command

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

SECRET = "shim-attack-jwt-secret-0123456789abcdef"
OTHER_SECRET = "another-daemons-jwt-secret-0123456789"
RIGHT = "shim-attack-right-token-4e1b"


def _wrong_tokens(n: int) -> list[tuple[str, str]]:
    now = int(time.time())
    kinds = [
        ("random", lambda i: f"guess-{i}-{'x' * (i % 7)}"),
        ("none", lambda i: ""),
        ("jwt_other_secret", lambda i: issue_token(OTHER_SECRET, f"u{i}")),
        ("jwt_expired", lambda i: jwt.encode({"sub": f"u{i}", "exp": now - 120 - i}, SECRET,
                                             "HS256")),
        ("jwt_bad_claim", lambda i: jwt.encode({"sub": f"u{i}", "exp": now + 600,
                                                "scopes": i}, SECRET, "HS256")),
        ("other_daemons_token", lambda i: f"{RIGHT}-of-another-daemon"),
    ]  # fmt: skip
    return [(kinds[i % len(kinds)][0], kinds[i % len(kinds)][1](i)) for i in range(n)]


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _env(daemon: DaemonProcess, token: str, tmp: Path) -> dict[str, str]:
    return {"EXAI_WS_PORT": str(daemon.port), "EXAI_WS_TOKEN": token,
            "EXAI_DATA_DIR": str(tmp / "shim-data"), "EXAI_LOG_LEVEL": "warning",
            "EXAI_SHIM_CONNECT_WAIT_S": "5", "PATH": "/usr/bin:/bin"}  # fmt: skip


async def _handshake_era(env: dict[str, str], cwd: Path) -> str:
    try:
        async with mcp_session(env, cwd) as mcp:
            listed = await mcp.list_tools()
            return f"connected_with_{len(listed.tools)}_tools"
    except BaseException as exc:  # the SDK's task group wraps what initialize raised
        leaves = _leaves(exc)
        if len(leaves) == 1 and isinstance(leaves[0], MCPError):
            message = leaves[0].error.message
            if message.startswith("UNAUTHORIZED: ") and "refused the token" in message:
                return "initialize_refused_unauthorized"
        return f"other: {leaves!r}"[:200]


async def _modern_era(env: dict[str, str], cwd: Path) -> str:
    command, *args = shim_command()
    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    async with Client(params, mode="auto") as client:
        try:
            listed = await client.list_tools()
            return f"listed_{len(listed.tools)}_tools"
        except MCPError as exc:
            if "UNAUTHORIZED: " not in exc.error.message:
                return f"other: {exc.error.message[:120]}"
        res = await client.call_tool("echo", {"text": "x"})
    code = (res.structured_content or {}).get("error", {}).get("code")
    ok = res.is_error and code == "UNAUTHORIZED" and "refused the token" in res.content[0].text
    return "list_and_call_refused_unauthorized" if ok else f"other: {res.content[0].text[:120]}"


async def test_every_wrong_token_is_refused_visibly(tmp_path: Path, figures):
    tries = scaled(30, minimum=6)
    daemon = DaemonProcess(tmp_path / "daemon", EXAI_WS_TOKEN=RIGHT, EXAI_JWT_SECRET=SECRET,
                           EXAI_AUTH_FAILURES_BURST="100000").start()  # fmt: skip
    handshake: Counter[str] = Counter()
    modern: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    try:
        for n, (kind, token) in enumerate(_wrong_tokens(tries)):
            kinds[kind] += 1
            cwd = tmp_path / f"try-{n}"
            cwd.mkdir()
            handshake[await _handshake_era(_env(daemon, token, cwd), cwd)] += 1
            modern[await _modern_era(_env(daemon, token, cwd), cwd)] += 1
        control = tmp_path / "control"
        control.mkdir()
        right = await _handshake_era(_env(daemon, RIGHT, control), control)
        problems = daemon.log_problems()
    finally:
        daemon.stop()
    figures.record("shim_token", tries=tries, kinds=dict(sorted(kinds.items())),
                   handshake_era_client=dict(handshake), modern_client=dict(modern),
                   right_token=right, daemon_error_log_lines=len(problems))  # fmt: skip
    assert handshake == Counter({"initialize_refused_unauthorized": tries}), handshake
    assert modern == Counter({"list_and_call_refused_unauthorized": tries}), modern
    assert right.startswith("connected_with_") and right != "connected_with_0_tools"
