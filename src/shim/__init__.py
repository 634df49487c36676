"""``exai shim``: an MCP stdio server that forwards to the exai daemon.

IDE agents speak MCP over stdio; the daemon speaks protocol v1 over WebSocket.
The shim translates between them (``translate``), serves MCP on asyncio pipes
(``stdio``) with the SDK's low-level server (``server``), can start a local
daemon once per machine (``autostart``) and exits with its parent
(``watchdog``); ``run`` ties these together.
"""

from exai.shim.run import ShimOptions, run_shim, serve
from exai.shim.server import Shim

__all__ = ["Shim", "ShimOptions", "run_shim", "serve"]
