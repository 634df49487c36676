"""MCP clients on the 1.x Python SDK: ``challenge`` through ``exai shim`` against PAL 9.8.2.

The 1.x ``ClientSession`` validates every result's ``structuredContent``
against the tool's ``outputSchema`` with ``jsonschema``, building the validator
(and checking the schema against its metaschema) on every call. PAL declares
no ``outputSchema``; this measures what exai costs such a client next to PAL,
``challenge`` on both (no model call), in one run, with the same client:

- exai's ``challenge`` through ``exai shim`` (daemon with default settings,
  audit trail on), as the 1.x client runs it;
- PAL 9.8.2's ``challenge`` (its own stdio server);
- exai again with the client's result validation switched off, the baseline
  that shows what validation costs.

Everything the comparison needs beyond exai lives in a benchmark-only venv that
this script creates (``~/.cache/exai-bench/mcp1-venv``, or
``EXAI_BENCH_MCP1_VENV``), never in the project's dependencies: ``mcp<2`` and
PAL's own requirements. PAL's source is not on PyPI at 9.8.2: point
``EXAI_BENCH_PAL_SOURCE`` at a checkout of BeehiveInnovations/pal-mcp-server,
or at its git directory (then tag ``v9.8.2`` is exported), or put the source in
``~/.cache/exai-bench/pal-mcp-server-9.8.2``. The client itself runs in that
venv (``scripts/bench/mcp1_driver.py``). Target: exai's p50 at most PAL's.

Run: ``python -m scripts.bench.mcp1_clients``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from scripts.bench.common import BaselineMissing, daemon_process

__all__ = ["main", "report", "run"]

PAL_VERSION = "9.8.2"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "exai-bench"
DRIVER = Path(__file__).with_name("mcp1_driver.py")
STATEMENT = "The outbox can lose events that reached it when the daemon is killed."


def _pal_source() -> Path:
    """PAL's source tree at 9.8.2, exported from a git directory when given one."""
    given = os.environ.get("EXAI_BENCH_PAL_SOURCE")
    target = CACHE / f"pal-mcp-server-{PAL_VERSION}"
    if given:
        path = Path(given).expanduser()
        if (path / "server.py").is_file():
            return path
        if not (target / "server.py").is_file():  # a git directory: export the tag
            target.mkdir(parents=True, exist_ok=True)
            archive = subprocess.run(
                ["git", f"--git-dir={path}", "archive", "--format=tar", f"v{PAL_VERSION}"],
                check=True, capture_output=True,
            ).stdout  # fmt: skip
            with tempfile.TemporaryFile() as tmp:
                tmp.write(archive)
                tmp.seek(0)
                with tarfile.open(fileobj=tmp) as tar:
                    tar.extractall(target, filter="data")
    if not (target / "server.py").is_file():
        raise BaselineMissing(
            "PAL's source is needed: set EXAI_BENCH_PAL_SOURCE to a checkout or the git "
            f"directory of BeehiveInnovations/pal-mcp-server, or put {PAL_VERSION} in {target}"
        )
    project = (target / "pyproject.toml").read_text()
    if f'version = "{PAL_VERSION}"' not in project:
        raise RuntimeError(f"{target} is not PAL {PAL_VERSION}")
    return target


def _venv(pal: Path) -> Path:
    """The benchmark venv with ``mcp<2`` and PAL's requirements; made once, then reused."""
    venv = Path(os.environ.get("EXAI_BENCH_MCP1_VENV", CACHE / "mcp1-venv")).expanduser()
    requirements = (pal / "requirements.txt").read_text()
    wanted = hashlib.sha256(f"mcp<2\n{requirements}".encode()).hexdigest()
    marker = venv / ".exai-bench-requirements"
    python = venv / "bin" / "python"
    if marker.is_file() and marker.read_text() == wanted and python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "mcp<2", "-r", str(pal / "requirements.txt")], check=True)
    marker.write_text(wanted)
    return python


def _base_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")
    return {k: os.environ[k] for k in keep if k in os.environ}


async def run(calls: int = 1000, rounds: int = 10, warmup: int = 50) -> dict[str, Any]:
    pal = _pal_source()
    python = await asyncio.to_thread(_venv, pal)
    async with daemon_process(EXAI_AUDIT_ENABLED="true") as (url, _):
        port = url.rsplit(":", 1)[1]
        exai_env = {**_base_env(), "EXAI_WS_PORT": port, "EXAI_WS_HOST": "127.0.0.1",
                    "EXAI_WS_TOKEN": "", "EXAI_WS_TOKENS": "", "EXAI_JWT_SECRET": "",
                    "EXAI_LOG_LEVEL": "warning"}  # fmt: skip
        shim = {"command": sys.executable, "args": ["-m", "exai.cli.main", "shim"],
                "env": exai_env, "cwd": tempfile.gettempdir(), "tool": "challenge",
                "arguments": {"prompt": STATEMENT}}  # fmt: skip
        # PAL wants one provider configured before it starts; challenge never calls it.
        pal_env = {**_base_env(), "GEMINI_API_KEY": "bench-key-never-used", "LOG_LEVEL": "WARNING"}
        pal_server = {"command": str(python), "args": [str(pal / "server.py")],
                      "env": pal_env, "cwd": str(pal), "tool": "challenge",
                      "arguments": {"prompt": STATEMENT}}  # fmt: skip
        spec = {
            "calls": calls, "rounds": rounds, "warmup": warmup,
            "servers": [
                {"name": "exai", **shim},
                {"name": "pal", **pal_server},
                {"name": "exai_no_validation", **shim, "validate": False},
            ],
        }  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            str(python), str(DRIVER), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        out, _ = await proc.communicate(json.dumps(spec).encode())
        if proc.returncode != 0:
            raise RuntimeError(f"the mcp 1.x driver failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out)
    servers = result["servers"]
    result["pal_version"] = PAL_VERSION
    result["met"] = servers["exai"]["p50_ms"] <= servers["pal"]["p50_ms"]
    return result


def report(r: dict[str, Any]) -> str:
    s = r["servers"]
    labels = (
        ("exai", "exai `challenge` through `exai shim`"),
        ("pal", f"PAL {r['pal_version']} `challenge`"),
        ("exai_no_validation", "exai, the client's result validation switched off"),
    )
    rows = [
        f"`mcp` {r['mcp_version']} Python client over stdio, {s['exai']['n']} calls per row "
        "in alternating blocks.\n",
        "| server | outputSchema declared | p50 | p99 |",
        "|---|---|---|---|",
    ]
    for key, label in labels:
        row = s[key]
        declared = "yes" if row["output_schema"] else "no"
        rows.append(f"| {label} | {declared} | {row['p50_ms']:.3f} ms | {row['p99_ms']:.3f} ms |")
    verdict = "met" if r["met"] else "NOT met"
    rows.append(f"\nexai at p50 against PAL: {s['exai']['p50_ms']:.3f} ms and "
                f"{s['pal']['p50_ms']:.3f} ms (target: at most PAL's: {verdict}).")  # fmt: skip
    return "\n".join(rows)


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print("## MCP 1.x Python clients: exai against PAL\n")
    print(report(results))
    return results


if __name__ == "__main__":
    main()
