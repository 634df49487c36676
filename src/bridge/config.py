"""The external MCP servers file (``EXAI_MCP_SERVERS_FILE``), validated on load.

The shape is Claude Desktop's, so an existing ``claude_desktop_config.json``
section can be copied as is, plus a few exai keys per server::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"],
                  "env": {"DEBUG": "0"}, "timeout_s": 30, "deny": ["write_*"]},
        "search": {"url": "https://search.example/mcp", "allow": ["query"],
                   "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}}
    }}

``${NAME}`` in ``args``, ``env``, ``url`` and ``headers`` is replaced by that
environment variable, so secrets stay out of the file. ``allow`` and ``deny``
take tool names or shell-style patterns (``write_*``); deny wins.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = ["BridgeConfig", "BridgeConfigError", "ServerConfig", "load_config"]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class BridgeConfigError(Exception):
    """The servers file cannot be used; the message names the file and the problem."""


class ServerConfig(BaseModel):
    """One external server: a command to run (stdio) or a URL (streamable HTTP)."""

    # Other clients' keys ("type", "description", ...) are tolerated, not required.
    model_config = ConfigDict(extra="ignore", frozen=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float | None = Field(default=None, gt=0)
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    disabled: bool = False

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either 'command' (stdio) or 'url' (streamable HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be http:// or https://, got {self.url!r}")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def permits(self, tool: str) -> bool:
        if any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.deny):
            return False
        return not self.allow or any(fnmatch.fnmatchcase(tool, p) for p in self.allow)


class BridgeConfig(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    servers: dict[str, ServerConfig] = Field(default_factory=dict, alias="mcpServers")

    @field_validator("servers")
    @classmethod
    def _names(cls, value: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in value:
            if not name.strip():
                raise ValueError("a server name is empty")
        return value


def load_config(path: Path, environ: dict[str, str] | None = None) -> BridgeConfig:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BridgeConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BridgeConfigError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise BridgeConfigError(f"{path}: expected an object with 'mcpServers'")
    env = os.environ if environ is None else environ
    servers = raw.get("mcpServers", {})
    if isinstance(servers, dict):
        raw = {**raw, "mcpServers": {k: _expand(v, env) for k, v in servers.items()}}
    try:
        return BridgeConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise BridgeConfigError(f"{path}: {problems}") from None


def _expand(server: Any, env: Any) -> Any:
    if not isinstance(server, dict):
        return server

    def sub(value: Any) -> Any:
        if isinstance(value, str):
            return _VAR.sub(lambda m: env.get(m[1], ""), value)
        if isinstance(value, list):
            return [sub(v) for v in value]
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        return value

    return {k: sub(v) if k in ("args", "env", "url", "headers") else v for k, v in server.items()}
