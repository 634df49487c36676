"""The real IDE clients the tests drive, at pinned versions, from the npm registry.

``python -m tests.clients.install`` installs them ahead of the suite (``make
test`` does); the fixtures call the same functions, which install nothing
once the cache holds them.

Claude Code's npm package is a launcher; its linux binary ships in the
optional dependency ``@anthropic-ai/claude-code-linux-x64``, which npm installs
with it. On Node 20 an unpinned install resolves an older release, hence the pin.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.npm_cache import npm_install

__all__ = ["CLAUDE_CODE", "CODEX", "claude_binary", "codex_binary"]

CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.330"
CODEX = "@openai/codex@0.169.0"


def claude_binary() -> Path:
    return npm_install([CLAUDE_CODE]) / "node_modules" / ".bin" / "claude"


def codex_binary() -> Path:
    return npm_install([CODEX]) / "node_modules" / ".bin" / "codex"


def main() -> None:
    for binary in (claude_binary(), codex_binary()):
        print(binary, file=sys.stderr)


if __name__ == "__main__":
    main()
