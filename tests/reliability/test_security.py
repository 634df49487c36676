"""Security: who may connect, what they may call and read, and what never leaks.

One ``exai serve`` process with two static-token principals (alice, bob), HS256
JWTs, every tool enabled, a project directory as the only allowed root, the
provider emulator behind Kimi and GLM, and the audit trail shipping to the
PostgREST fixture; its log is JSON at debug level. The cases:

* wrong, missing, expired and tampered credentials: ``hello_ack`` refused, 4003;
* JWT scopes that forbid a tool: ``FORBIDDEN`` for every tool in the registry;
* another principal's session (4003) or ``continuation_id`` (``CONVERSATION_NOT_FOUND``,
  for every tool that takes one), with the owner's data untouched;
* path traversal and symlink escapes in every path input of every tool that takes
  one, found in the registry when the suite runs: refused, and the content of the
  file outside never reaches the provider or the answer;
* oversized frames and clients that stall before or during ``hello``;
* finally, every known secret is searched for in the daemon's log, the audit
  outbox, what the Supabase fixture received, ``/metrics``, ``/ready`` and the
  introspection tools: none may appear.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from exai.client import ExaiClient, HelloRefused
from exai.emulators.postgrest import PostgrestEmulator
from exai.emulators.provider import EmulatorServer
from exai.protocol import CallToolResult, ErrorCode, ErrorFrame, parse_server_frame
from exai.settings import Settings
from exai.tools.registry import ToolRegistry
from tests.reliability.arguments import minimal_arguments, path_fields
from tests.reliability.conftest import SUPABASE_KEY
from tests.reliability.harness import (
    AUDIT_TABLE,
    DaemonProcess,
    client_frame,
    open_raw_websocket,
    provider_env,
    supabase_env,
    wait_until,
)

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]

ALICE = "alice-static-token-Q7m2x9Vb"
BOB = "bob-static-token-W4k8z1Nc"
JWT_SECRET = "jwt-signing-secret-R5t1y8u3i9o0-" + "k" * 40  # 64+ bytes: HS512 would warn
KIMI_KEY = "sk-kimi-reliability-secret-H3j6k9P2"
GLM_KEY = "glm-reliability-secret-L2n5b8T4"
LIMIT = 64 * 1024
HELLO_LIMIT = 16 * 1024  # EXAI_HELLO_MAX_BYTES
HELLO_TIMEOUT_S = 2.0
MODEL = "kimi-k2.6"

INFOS = {
    t.name: t
    for t in ToolRegistry.from_entry_points(
        Settings(_env_file=None, tool_profile="full")  # type: ignore[call-arg]
    ).infos()
}
FILE_FIELDS = [
    (name, field, kind)
    for name, info in INFOS.items()
    for field, kind in path_fields(info.inputSchema).items()
]
CONTINUABLE = [n for n, i in INFOS.items() if "continuation_id" in i.inputSchema["properties"]]
ISSUED: list[str] = []  # every JWT minted here: bearer credentials, searched for at the end


def _jwt(
    sub: str | None = "carol",
    *,
    ttl: float = 3600,
    secret: str = JWT_SECRET,
    algorithm: str = "HS256",
    **claims: Any,
) -> str:
    now = int(time.time())
    body: dict[str, Any] = {"iat": now, "exp": now + int(ttl), **claims}
    if sub is not None:
        body["sub"] = sub
    token = jwt.encode(
        {k: v for k, v in body.items() if v is not None}, secret, algorithm=algorithm
    )
    ISSUED.append(token)
    return token


def _tamper_payload(token: str, **claims: Any) -> str:
    header, payload, signature = token.split(".")
    decoded = json.loads(jwt.utils.base64url_decode(payload))
    forged = jwt.utils.base64url_encode(json.dumps({**decoded, **claims}).encode()).decode()
    return f"{header}.{forged}.{signature}"


# --- the world the daemon runs in ----------------------------------------------------


@dataclass
class World:
    root: Path
    outside: Path
    legit: Path  # a file inside the root whose content carries MARKER
    marker: str
    leaks: tuple[str, ...]  # text that must never reach a provider or an answer
    attacks: list[tuple[str, str, set[ErrorCode] | None]]  # (name, path, expected codes)


def _build_world(workdir: Path) -> World:
    root, outside, data = workdir / "project", workdir / "outside", workdir / "data"
    for d in (root, outside, data, root / "escape-dir", root / ".ssh"):
        d.mkdir(parents=True, exist_ok=True)
    outside_secret = f"OUTSIDE-SECRET-{uuid.uuid4().hex}"
    (outside / "secret.txt").write_text(f"{outside_secret}\n")
    marker = f"LEGIT-CONTENT-{uuid.uuid4().hex}"
    legit = root / "legit.py"
    legit.write_text("def f():\n    return 1\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "legit.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    legit.write_text(f"def f():\n    return '{marker}'\n")  # a pending change for precommit
    (root / "escape-dir" / "ok.py").write_text("x = 1\n")
    (root / "escape-dir" / "sneaky.txt").symlink_to(outside / "secret.txt")
    (root / "link-to-secret.txt").symlink_to(outside / "secret.txt")
    (root / "link-to-outside").symlink_to(outside, target_is_directory=True)
    (root / "link-to-etc").symlink_to("/etc", target_is_directory=True)
    (root / "link-to-root").symlink_to("/", target_is_directory=True)
    (root / "link-to-store").symlink_to(data / "conversations.sqlite3")
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")
    (root / ".ssh" / "id_rsa").write_text(f"PRIVATE-KEY-{outside_secret}\n")
    os.mkfifo(root / "fifo")
    forbidden, invalid = {ErrorCode.FORBIDDEN}, {ErrorCode.VALIDATION_ERROR}
    refused = forbidden | invalid
    r, o = str(root), str(outside)
    attacks: list[tuple[str, str, set[ErrorCode] | None]] = [
        ("system file", "/etc/passwd", forbidden),
        ("system file via ..", "/etc/../etc/passwd", forbidden),
        ("process environment", "/proc/self/environ", forbidden),
        ("/proc root escape", "/proc/self/root/etc/passwd", forbidden),
        ("device", "/dev/zero", forbidden),
        ("outside file", f"{o}/secret.txt", forbidden),
        ("traversal with ..", f"{r}/../outside/secret.txt", forbidden),
        ("traversal through a missing dir", f"{r}/nope/../../outside/secret.txt", forbidden),
        ("traversal with doubled slashes", f"{r}//..//..//{o.lstrip('/')}//secret.txt", forbidden),
        ("symlink to an outside file", f"{r}/link-to-secret.txt", forbidden),
        ("file under a symlinked outside dir", f"{r}/link-to-outside/secret.txt", forbidden),
        ("symlinked outside dir", f"{r}/link-to-outside", forbidden),
        ("symlink to /etc", f"{r}/link-to-etc/passwd", forbidden),
        ("symlink to /", f"{r}/link-to-root/etc/passwd", forbidden),
        ("symlink to the daemon's own store", f"{r}/link-to-store", forbidden),
        ("credential store inside the root", f"{r}/.ssh/id_rsa", forbidden),
        ("symlink loop", f"{r}/loop-a", refused),
        ("FIFO", f"{r}/fifo", refused),
        ("relative path", "../outside/secret.txt", invalid),
        ("home-relative path", "~/.ssh/id_rsa", invalid),
        ("file URL", f"file://{o}/secret.txt", invalid),
        ("NUL byte", f"{r}/legit.py\x00.txt", invalid),
        ("empty path", "", refused),
        # Named inside the root, so allowed; the symlink inside must be skipped, not read.
        ("dir holding an escaping symlink", f"{r}/escape-dir", None),
    ]
    passwd = Path("/etc/passwd").read_text().splitlines()[0] if Path("/etc/passwd").exists() else ""
    leaks = (
        outside_secret,
        passwd,
        "SQLite format 3",
        KIMI_KEY,
        GLM_KEY,
        SUPABASE_KEY,
        JWT_SECRET,
        ALICE,
        BOB,
    )
    return World(root, outside, legit, marker, tuple(x for x in leaks if x), attacks)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return _build_world(tmp_path_factory.mktemp("security"))


@pytest.fixture(scope="module")
def supabase() -> Iterator[PostgrestEmulator]:
    server = PostgrestEmulator({"audit_events": AUDIT_TABLE}, api_key=SUPABASE_KEY).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def daemon(
    world: World, provider_emulator: EmulatorServer, supabase: PostgrestEmulator
) -> Iterator[DaemonProcess]:
    process = DaemonProcess(
        world.root.parent,
        EXAI_WS_TOKENS=f"alice={ALICE},bob={BOB}",
        EXAI_JWT_SECRET=JWT_SECRET,
        EXAI_TOOL_PROFILE="full",
        EXAI_ALLOWED_ROOTS=str(world.root),
        EXAI_LOG_LEVEL="debug",
        EXAI_MAX_FRAME_BYTES=str(LIMIT),
        EXAI_HELLO_MAX_BYTES=str(HELLO_LIMIT),
        EXAI_HELLO_TIMEOUT_S=str(HELLO_TIMEOUT_S),
        # Some forty hellos are refused on purpose here, each of which must say why;
        # the failed-login throttle has tests of its own (tests/daemon/test_admission.py).
        EXAI_AUTH_FAILURES_BURST="1000",
        EXAI_RATE_LIMIT_PER_MIN="0",
        **provider_env(provider_emulator, KIMI_KEY, GLM_KEY),
        **supabase_env(supabase, SUPABASE_KEY),
    ).start()
    yield process
    process.stop()


async def _hello(url: str, frame: dict[str, Any] | str) -> tuple[list[Any], int | None]:
    """Send a first frame; return what the daemon answered and its close code (None if open)."""
    async with connect(url, max_size=None) as ws:
        await ws.send(frame if isinstance(frame, str) else json.dumps(frame))
        answers: list[Any] = []
        try:
            async with asyncio.timeout(15):
                while True:
                    answer = parse_server_frame(await ws.recv())
                    answers.append(answer)
                    if answer.op == "hello_ack" and answer.ok:
                        return answers, None
        except ConnectionClosed as exc:
            return answers, exc.rcvd.code if exc.rcvd else None


def _assert_refused(answers: list[Any], code: int | None, close: int = 4003) -> None:
    assert code == close, (code, answers)
    assert len(answers) == 1 and not answers[0].ok, answers
    if close == 4003:
        assert answers[0].error.code == ErrorCode.UNAUTHORIZED


# --- credentials ---------------------------------------------------------------------

REFUSED_TOKENS: list[tuple[str, Any]] = [
    ("missing token", None),
    ("empty token", ""),
    ("wrong token", "not-a-token"),
    ("alice's token with a trailing space", ALICE + " "),
    ("alice's token with one more character", ALICE + "x"),
    ("alice's token less its last character", ALICE[:-1]),
    ("alice's token in capitals", ALICE.upper()),
    ("alice's token with a NUL", ALICE + "\x00"),
    ("the JWT secret as a token", JWT_SECRET),
    ("the provider key as a token", KIMI_KEY),
    ("8192-character token", "t" * 8192),
]


@pytest.mark.parametrize(
    "token", [t for _, t in REFUSED_TOKENS], ids=[n for n, _ in REFUSED_TOKENS]
)
async def test_wrong_and_missing_tokens_are_refused(
    daemon: DaemonProcess, figures, token: Any
) -> None:
    frame = {"op": "hello"} if token is None else {"op": "hello", "token": token}
    _assert_refused(*await _hello(daemon.url, frame))
    figures.add("security", "auth_cases")


@pytest.mark.parametrize("token", [12345, ["a"], "t" * 8193], ids=["number", "list", "8193 chars"])
async def test_malformed_tokens_are_refused_as_a_bad_hello(
    daemon: DaemonProcess, figures, token: Any
) -> None:
    _assert_refused(*await _hello(daemon.url, {"op": "hello", "token": token}), close=4001)
    figures.add("security", "auth_cases")


def _bad_jwts() -> list[tuple[str, str]]:
    good = _jwt("carol")
    header, payload, signature = good.split(".")
    alg_none = jwt.utils.base64url_encode(b'{"alg":"none","typ":"JWT"}').decode()
    rs256 = jwt.utils.base64url_encode(b'{"alg":"RS256","typ":"JWT"}').decode()
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    return [
        ("expired an hour ago", _jwt(ttl=-3600)),
        ("not valid for another hour", _jwt(nbf=int(time.time()) + 3600)),
        ("payload changed to alice", _tamper_payload(good, sub="alice")),
        ("expiry extended", _tamper_payload(_jwt(ttl=-3600), exp=int(time.time()) + 3600)),
        ("signature altered", f"{header}.{payload}.{flipped}"),
        ("signature removed", f"{header}.{payload}."),
        ("alg none", f"{alg_none}.{payload}."),
        ("header says RS256", f"{rs256}.{payload}.{signature}"),
        ("signed with HS512", _jwt(algorithm="HS512")),
        ("signed with another secret", _jwt(secret="some-other-secret-" + "0" * 48)),
        ("no exp claim", _jwt(exp=None)),
        ("no sub claim", _jwt(None)),
        ("three dots of garbage", "a.b.c"),
    ]


BAD_JWTS = _bad_jwts()


@pytest.mark.parametrize("token", [t for _, t in BAD_JWTS], ids=[n for n, _ in BAD_JWTS])
async def test_expired_and_tampered_jwts_are_refused(
    daemon: DaemonProcess, figures, token: str
) -> None:
    answers, code = await _hello(daemon.url, {"op": "hello", "token": token})
    _assert_refused(answers, code)
    figures.add("security", "auth_cases")


async def test_valid_credentials_are_accepted(daemon: DaemonProcess, figures) -> None:
    within_leeway = _jwt("carol", ttl=-10)  # expired 10 s ago; EXAI_JWT_LEEWAY_S is 30
    for token in (ALICE, BOB, _jwt("carol"), within_leeway):
        answers, code = await _hello(daemon.url, {"op": "hello", "token": token})
        assert code is None and answers[-1].ok, answers
        figures.add("security", "auth_cases")


# --- scopes ----------------------------------------------------------------------------


async def test_scopes_forbid_every_tool_they_do_not_name(daemon: DaemonProcess, figures) -> None:
    async with ExaiClient(daemon.url, _jwt("scoped", scopes=["echo"])) as client:
        assert (await client.call("echo", {"text": "allowed"})).error is None
        for name in INFOS:
            if name == "echo":
                continue
            res = await client.call(name, {})
            assert res.error is not None and res.error.code == ErrorCode.FORBIDDEN, (name, res)
            figures.add("security", "scope_cases")
    async with ExaiClient(daemon.url, _jwt("scoped", scopes=[])) as client:
        for name in INFOS:
            res = await client.call(name, {})
            assert res.error is not None and res.error.code == ErrorCode.FORBIDDEN, (name, res)
            figures.add("security", "scope_cases")


async def test_narrower_scopes_apply_when_a_session_is_resumed(
    daemon: DaemonProcess, figures
) -> None:
    async with ExaiClient(daemon.url, _jwt("dave")) as client:
        assert (await client.call("version")).error is None
        session = client.session_id
    async with ExaiClient(daemon.url, _jwt("dave", scopes=["echo"]), session_id=session) as again:
        assert again.session_id == session
        res = await again.call("version")
        assert res.error is not None and res.error.code == ErrorCode.FORBIDDEN
    figures.add("security", "scope_cases")


# --- other principals' sessions and conversations ----------------------------------------


async def test_another_principals_session_cannot_be_resumed(daemon: DaemonProcess, figures) -> None:
    session = f"alice-session-{uuid.uuid4().hex[:8]}"
    async with ExaiClient(daemon.url, ALICE, session_id=session) as alice:
        done = await alice.call("echo", {"text": "alice's private result"}, request_id="mine")
        assert done.error is None
        # While alice is connected, and with alice's request id in flight too.
        _assert_refused(
            *await _hello(daemon.url, {"op": "hello", "token": BOB, "session_id": session})
        )
        assert (await alice.call("echo", {"text": "still here"})).error is None
        with pytest.raises(HelloRefused):
            async with ExaiClient(daemon.url, _jwt("mallory"), session_id=session):
                pass
    # After alice has gone, her session (and its replay cache) is still hers.
    _assert_refused(*await _hello(daemon.url, {"op": "hello", "token": BOB, "session_id": session}))
    async with ExaiClient(daemon.url, BOB) as bob:
        mine = await bob.call("echo", {"text": "bob's own"}, request_id="mine")
        assert mine.outputs[0].text == "bob's own" and not mine.metadata.replayed
    async with ExaiClient(daemon.url, ALICE, session_id=session) as alice:
        again = {"text": "alice's private result"}
        replay = await alice.call("echo", again, request_id="mine")
        assert replay.metadata.replayed and replay.outputs[0].text == "alice's private result"
    figures.add("security", "ownership_cases", 4)


async def _alice_threads(daemon: DaemonProcess, world: World, tool: str) -> dict[str, str]:
    """A fresh chat thread of alice's and, for a workflow tool, a workflow of hers."""
    threads: dict[str, str] = {}
    async with ExaiClient(daemon.url, ALICE) as alice:
        res = await alice.call("chat", {"prompt": "ALICE-PRIVATE-PROMPT", "model": MODEL})
        assert res.error is None, res.error
        threads["chat"] = str(res.metadata.continuation_id)
        if "step_number" in INFOS[tool].inputSchema["properties"]:
            args = _base_arguments(
                tool, world, step_number=1, total_steps=2, next_step_required=True
            )
            res = await alice.call(tool, args)
            assert res.error is None, (tool, res.error)
            threads[tool] = str(res.metadata.continuation_id)
    return threads


@pytest.mark.parametrize("tool", CONTINUABLE)
async def test_another_principals_continuation_id_is_not_found(
    daemon: DaemonProcess, world: World, figures, tool: str
) -> None:
    threads = await _alice_threads(daemon, world, tool)
    async with ExaiClient(daemon.url, BOB) as bob:
        for which, thread in threads.items():
            extra: dict[str, Any] = {"continuation_id": thread}
            if which != "chat":  # the next step of her workflow; some tools want a theory by then
                extra.update(step_number=2, total_steps=2)
                if "hypothesis" in INFOS[tool].inputSchema["properties"]:
                    extra["hypothesis"] = "a theory"
            if tool == "artifact":
                extra["artifact_id"] = "a1"
            args = _base_arguments(tool, world, **extra)
            if tool == "schedule":  # a job that would continue her thread
                args.update(tool="chat", arguments={"prompt": "hi"}, when="every 1h")
            res = await bob.call(tool, args)
            assert res.error is not None, res
            assert res.error.code == ErrorCode.CONVERSATION_NOT_FOUND, (tool, which, res.error)
            assert "ALICE-PRIVATE-PROMPT" not in json.dumps(res.model_dump(mode="json"))
            figures.add("security", "ownership_cases")
    async with ExaiClient(daemon.url, ALICE) as alice:  # her thread is as she left it
        res = await alice.call(
            "chat", {"prompt": "still mine?", "model": MODEL, "continuation_id": threads["chat"]}
        )
        assert res.error is None and "(saw 4 messages)" in res.outputs[0].text, res


# --- paths -----------------------------------------------------------------------------


def _legit(kind: str, world: World) -> Any:
    return [str(world.legit)] if kind == "array" else str(world.root)


def _base_arguments(tool: str, world: World, **overrides: Any) -> dict[str, Any]:
    """Valid arguments, with every required path input pointing inside the root."""
    schema = INFOS[tool].inputSchema
    fields = path_fields(schema)
    required = {f: _legit(fields[f], world) for f in schema.get("required", []) if f in fields}
    return minimal_arguments(schema, **{**required, **overrides})


def _leaked(texts: list[str], world: World) -> list[str]:
    return [secret[:24] for secret in world.leaks if any(secret in text for text in texts)]


async def _call_and_watch(
    client: ExaiClient, emulator: EmulatorServer, tool: str, arguments: dict[str, Any]
) -> tuple[CallToolResult, list[str]]:
    """The result, and everything this call sent to the provider or returned."""
    seen = len(emulator.requests)
    res = await client.call(tool, arguments, wait_s=120)
    sent = [json.dumps(r["body"]) for r in emulator.requests[seen:]]
    return res, [*sent, json.dumps(res.model_dump(mode="json"))]


@pytest.mark.parametrize(
    ("tool", "field", "kind"), FILE_FIELDS, ids=[f"{t}.{f}" for t, f, _ in FILE_FIELDS]
)
async def test_path_escapes_are_refused_in_every_file_taking_tool(
    daemon: DaemonProcess,
    world: World,
    emulator: EmulatorServer,
    figures,
    tool: str,
    field: str,
    kind: str,
) -> None:
    failures: list[str] = []
    async with ExaiClient(daemon.url, ALICE) as client:
        # The control: the same call with a path inside the root succeeds, so the
        # refusals below are about the paths and nothing else.
        control, seen = await _call_and_watch(
            client, emulator, tool, _base_arguments(tool, world, **{field: _legit(kind, world)})
        )
        assert control.error is None, f"{tool}: the control call failed: {control.error}"
        if any(world.marker in text for text in seen[:-1]):
            figures.add("security", "file_fields_read_by_a_model")
        for name, path, expected in world.attacks:
            value = [path] if kind == "array" else path
            res, seen = await _call_and_watch(
                client, emulator, tool, _base_arguments(tool, world, **{field: value})
            )
            code = res.error.code if res.error else None
            if expected is not None and code not in expected:
                failures.append(f"{name} ({path!r}): got {code}, expected one of {expected}")
            if code == ErrorCode.INTERNAL_ERROR:
                failures.append(f"{name}: INTERNAL_ERROR {res.error}")
            if leaked := _leaked(seen, world):
                failures.append(f"{name}: LEAKED {leaked}")
                figures.add("security", "path_leaks")
            figures.add("security", "path_attacks")
    figures.add("security", "file_fields")
    section = figures.sections["security"]
    section["file_tools"] = len({t for t, _, _ in FILE_FIELDS})
    section.setdefault("path_leaks", 0)
    assert failures == [], f"{tool}.{field}:\n" + "\n".join(failures)


# --- oversized frames and slow clients ------------------------------------------------


async def test_oversized_frames(daemon: DaemonProcess, figures) -> None:
    # Before hello: nothing is read beyond the size of a hello, and no session is made.
    sessions = daemon.metrics()["exai_sessions"]
    _, code = await _hello(daemon.url, "x" * (2 * LIMIT + 1))
    assert code == 1009
    _, code = await _hello(daemon.url, {"op": "hello", "token": "t" * HELLO_LIMIT})
    assert code == 1009
    answers, code = await _hello(daemon.url, {"op": "hello", "token": "t" * 8193})
    assert code == 4001 and not answers[0].ok
    assert daemon.metrics()["exai_sessions"] <= sessions
    # After hello: an error frame, the connection stays; beyond twice the limit, 1009.
    async with connect(daemon.url, max_size=None) as ws:
        await ws.send(json.dumps({"op": "hello", "token": ALICE}))
        assert parse_server_frame(await ws.recv()).ok
        await ws.send(
            json.dumps(
                {
                    "op": "call_tool",
                    "request_id": "big",
                    "name": "echo",
                    "arguments": {"text": "y" * (LIMIT + 10)},
                }
            )
        )
        reply = parse_server_frame(await ws.recv())
        assert isinstance(reply, ErrorFrame) and "max_frame_bytes" in reply.error.message
        await ws.send(json.dumps({"op": "ping", "request_id": "after"}))
        assert parse_server_frame(await ws.recv()).request_id == "after"
        await ws.send("z" * (2 * LIMIT + 1))
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
        assert info.value.rcvd is not None and info.value.rcvd.code == 1009
    figures.add("security", "oversize_and_slow_cases", 5)


async def test_clients_that_stall_before_hello_are_cut_off(daemon: DaemonProcess, figures) -> None:
    async def silent() -> int | None:
        _, code = await _hello_after(daemon.url, None)
        return code

    async def half_a_frame() -> bytes:
        reader, writer = await open_raw_websocket(daemon.port)
        writer.write(client_frame(json.dumps({"op": "hello", "token": ALICE}))[:5])
        try:
            return await asyncio.wait_for(reader.read(), HELLO_TIMEOUT_S + 15)
        finally:
            writer.close()

    async def half_a_request() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", daemon.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")
        try:
            return await asyncio.wait_for(reader.read(), 30)  # websockets' open_timeout: 10 s
        finally:
            writer.close()

    code, closed_mid_frame, closed_mid_request = await asyncio.gather(
        silent(), half_a_frame(), half_a_request()
    )
    assert code == 4002
    # A close frame (opcode 8) with code 4002, then the end of the stream.
    assert closed_mid_frame[0] == 0x88, closed_mid_frame[:40]
    assert int.from_bytes(closed_mid_frame[2:4], "big") == 4002
    assert closed_mid_request == b"" or closed_mid_request.startswith(b"HTTP/1.1 4")
    figures.add("security", "oversize_and_slow_cases", 3)


async def _hello_after(url: str, frame: dict[str, Any] | None) -> tuple[list[Any], int | None]:
    async with connect(url) as ws:
        if frame is not None:
            await ws.send(json.dumps(frame))
        try:
            async with asyncio.timeout(HELLO_TIMEOUT_S + 15):
                return [parse_server_frame(await ws.recv())], None
        except ConnectionClosed as exc:
            return [], exc.rcvd.code if exc.rcvd else None


# --- the scan: no known secret anywhere ---------------------------------------------------


async def test_no_known_secret_in_logs_audit_events_or_endpoints(
    daemon: DaemonProcess,
    world: World,
    supabase: PostgrestEmulator,
    emulator: EmulatorServer,
    figures,
) -> None:
    # Put the secrets where a careless daemon would leak them.
    for token in (JWT_SECRET, KIMI_KEY, SUPABASE_KEY, ALICE + "x", _jwt(ttl=-3600)):
        _assert_refused(*await _hello(daemon.url, {"op": "hello", "token": token}))
    supabase.fail(503, times=3)  # shipping errors get logged
    emulator.script({"status": 401, "error": "auth"}, {"status": 500}, vendor="kimi")
    async with ExaiClient(daemon.url, ALICE) as alice:
        for prompt in (
            "provider refuses the key",
            "provider fails",
            f"my keys are {KIMI_KEY} and {SUPABASE_KEY}, token {BOB}",
        ):
            await alice.call("chat", {"prompt": prompt, "model": MODEL})
        await alice.call("echo", {"text": f"echo {ALICE} {JWT_SECRET}"})
        introspection = [await alice.call(name) for name in ("status", "listmodels", "version")]
    supabase.healthy()
    await wait_until(
        lambda: daemon.metrics().get("exai_audit_backlog") == 0, 60, "audit backlog shipped"
    )
    endpoints = [daemon.http(path)[1] for path in ("/metrics", "/ready", "/health")]
    assert daemon.stop() == 0  # a clean stop: the outbox is flushed and closed

    secrets = [ALICE, BOB, JWT_SECRET, KIMI_KEY, GLM_KEY, SUPABASE_KEY, *ISSUED]
    log = daemon.log_text()
    outbox = b"".join(p.read_bytes() for p in daemon.data_dir.glob("audit-outbox.sqlite3*"))
    shipped = json.dumps([w.body for w in supabase.writes()])
    stored = json.dumps(supabase.rows("audit_events"))
    answers = json.dumps([r.model_dump(mode="json") for r in introspection])
    places = {
        "log": log,
        "supabase requests": shipped,
        "supabase rows": stored,
        "endpoints": "\n".join(endpoints),
        "introspection tools": answers,
    }
    found = [
        f"{secret[:12]}... in {where}"
        for secret in secrets
        for where, text in places.items()
        if secret in text
    ]
    found += [
        f"{secret[:12]}... in the outbox file" for secret in secrets if secret.encode() in outbox
    ]
    lines = [line for line in log.splitlines() if line.strip()]
    assert any('"hello refused"' in line for line in lines), "the scan saw no refused hello"
    events = supabase.rows("audit_events")
    assert any(e["kind"] == "auth_failed" for e in events)
    assert any(e["kind"] == "conversation_turn" for e in events)
    section = figures.sections.setdefault("security", {})
    kinds = ("auth_cases", "scope_cases", "ownership_cases", "file_fields", "path_attacks",
             "oversize_and_slow_cases")  # fmt: skip
    figures.record(
        "security",
        cases=sum(section.get(kind, 0) for kind in kinds) + 1,  # this scan is one more
        secrets_scanned=len(secrets),
        log_lines_scanned=len(lines),
        audit_events_scanned=len(events),
        secrets_found=len(found),
    )
    assert found == [], found
