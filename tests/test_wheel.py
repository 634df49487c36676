"""exai installed as users install it: the wheel, in a clean venv, serves every face.

The wheel is built from this checkout and installed into a new virtual
environment with no editable install and nothing of the repository on the
path; its own ``exai serve`` is started from a directory outside the
repository, and each face answers a call: WebSocket (``echo``), MCP over HTTP
(``tools/call``), and the OpenAI-compatible ``/v1`` (a completion from the
provider emulator), and the console serves its sign-in page and its script. A
subpackage missing from the package list, or a data file missing from the
package data, fails here rather than on a user's machine.

The wheel's dependencies are not downloaded and unpacked again (that took 25 s
of CPU, the suite's largest single setup): the new venv sees, through a
``.pth`` file, links to exactly the distributions the wheel declares, with
their own dependencies, as this checkout's venv has them installed; anything
the package imports without declaring it is absent, as it would be on a
user's machine, and ``pip check`` confirms that every declared requirement is
met at a version it accepts.
"""

from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import Distribution, distribution
from pathlib import Path

import httpx
import pytest
from openai import AsyncOpenAI
from packaging.requirements import Requirement

from exai.client import ExaiClient
from exai.emulators.provider import EmulatorServer
from tests.shim.helpers import DaemonProcess

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "wheel-test-token"


def _run(*command: str | Path, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    output = done.stdout[-2000:] + done.stderr[-2000:]
    assert done.returncode == 0, f"{command[:3]} failed:\n{output}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with exai installed from its wheel; returns the venv's bin directory."""
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy of what the build reads: setuptools writes its build/ beside the
    # sources, and two test workers building in the checkout would trip over each other.
    source = work / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work / "dist", source,
         cwd=work)  # fmt: skip
    (wheel,) = (work / "dist").glob("exai_mcp-*.whl")
    _run(sys.executable, "-m", "venv", work / "venv", cwd=work)
    bin_dir = work / "venv" / "bin"
    site = Path(_run(bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_path("
                     "'purelib'))", cwd=work).strip())  # fmt: skip
    deps = _link_dependencies(_requires(wheel), work / "deps")
    (site / "exai_test_deps.pth").write_text(f"{deps}\n")
    _run(bin_dir / "python", "-m", "pip", "install", "-q", "--no-deps", wheel, cwd=work)
    _run(bin_dir / "python", "-m", "pip", "check", cwd=work)
    return bin_dir


def _requires(wheel: Path) -> list[str]:
    """The wheel's own ``Requires-Dist`` lines, from its METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    return metadata.get_all("Requires-Dist") or []


def _link_dependencies(requires: list[str], into: Path) -> Path:
    """Links in ``into`` to the installed files of the distributions ``requires``
    names (no extras of the wheel's own), and of theirs, from this venv: each
    distribution's top-level packages, modules and metadata directory."""
    into.mkdir()
    seen: set[str] = set()
    waiting = list(requires)
    while waiting:
        requirement = Requirement(waiting.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        dist = distribution(requirement.name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        extras = {f"{key}[{extra}]" for extra in requirement.extras} - seen
        if extras:  # a second mention may ask for extras the first did not
            seen |= extras
            waiting += _extras_asked(requirement, dist)
        if key in seen:
            continue
        seen.add(key)
        waiting += dist.requires or []
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}:
            link = into / top
            if not link.exists():
                link.symlink_to(Path(str(dist.locate_file(top))))
    return into


def _extras_asked(requirement: Requirement, dist: Distribution) -> list[str]:
    """``dist``'s requirements that ``requirement``'s extras (``pkg[extra]``) add."""
    asked = []
    for line in dist.requires or []:
        own = Requirement(line)
        if own.marker is None:
            continue
        if any(own.marker.evaluate({"extra": extra}) for extra in requirement.extras):
            asked.append(f"{own.name}{own.specifier}")
    return asked


def test_the_installed_package_is_the_wheel_and_has_every_subpackage(installed: Path):
    where = _run(installed / "python", "-c", "import exai, sys; print(exai.__file__)",
                 cwd=installed)  # fmt: skip
    assert "site-packages" in where and str(ROOT) not in where
    subpackages = sorted(
        "exai." + ".".join(p.parent.relative_to(ROOT / "src").parts)
        for p in (ROOT / "src").rglob("__init__.py")
        if p.parent != ROOT / "src"
    )
    listing = _run(installed / "python", "-c", (
        "import importlib.util, json, sys; names = json.loads(sys.argv[1]);"
        "print(json.dumps([n for n in names if importlib.util.find_spec(n) is None]))"
    ), json.dumps(subpackages), cwd=installed)  # fmt: skip
    assert json.loads(listing) == []


async def test_the_installed_exai_serve_answers_on_each_face(installed: Path, tmp_path: Path):
    emulator = EmulatorServer().start()
    daemon = DaemonProcess(
        tmp_path, command=[str(installed / "exai"), "serve"], EXAI_WS_TOKEN=TOKEN,
        KIMI_API_KEY="sk-wheel", KIMI_BASE_URL=emulator.base_url_kimi,
    )  # fmt: skip
    try:
        daemon.start(timeout_s=60)
        async with ExaiClient(daemon.url, TOKEN) as client:
            echoed = await client.call("echo", {"text": "from the wheel"})
        assert echoed.error is None and echoed.outputs[0].text == "from the wheel"

        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "over /mcp"}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}}  # fmt: skip
        headers = {"Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": "2026-07-28",
                   "Mcp-Method": "tools/call", "Mcp-Name": "echo",
                   "Accept": "application/json, text/event-stream"}  # fmt: skip
        async with httpx.AsyncClient() as http:
            answer = await http.post(daemon.mcp_url, json=call, headers=headers)
        assert answer.json()["result"]["content"][0]["text"] == "over /mcp"

        openai = AsyncOpenAI(base_url=f"http://127.0.0.1:{daemon.http_port}/v1", api_key=TOKEN)
        completion = await openai.chat.completions.create(
            model="kimi-k2.6", messages=[{"role": "user", "content": "hello from the wheel"}]
        )
        await openai.close()
        assert completion.choices[0].message.content
        assert emulator.requests, "the completion reached the provider emulator"

        # The console's templates and static files are in the wheel too.
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{daemon.http_port}") as http:
            form = await http.get("/console/login")
            script = await http.get("/console/static/console.js")
        assert form.status_code == 200 and 'id="signin"' in form.text
        assert script.status_code == 200 and "streamReply" in script.text
    finally:
        daemon.stop()
        emulator.stop()
