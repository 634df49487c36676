"""A small external MCP server for the bridge tests, built with the SDK's ``MCPServer``.

Run as ``python fixture_server.py stdio`` or ``python fixture_server.py http PORT``.
If the file named by ``FIXTURE_FLAG_FILE`` exists when it starts, it also offers
``bonus``: a restarted server with a different tool list, for the re-listing test.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("fixture")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@server.tool(name="odd.name")
def odd_name() -> str:
    """A tool whose name needs sanitizing."""
    return "odd"


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep, reporting progress twice."""
    await ctx.report_progress(1, 2, "halfway")
    await asyncio.sleep(seconds)
    await ctx.report_progress(2, 2, "done")
    return f"slept {seconds}"


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(message)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def environment() -> dict[str, str]:
    """The server's whole environment."""
    return dict(os.environ)


@server.tool()
def crash() -> str:
    """Exit the process at once, as a crash would."""
    os._exit(3)


flag = os.environ.get("FIXTURE_FLAG_FILE")
if flag and Path(flag).exists():

    @server.tool()
    def bonus() -> str:
        """Only offered after a restart with the flag file present."""
        return "bonus"


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
