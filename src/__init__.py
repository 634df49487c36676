"""exai: a tool daemon for Kimi and GLM models, spoken to over WebSocket or MCP."""

import os as _os

__version__ = "0.1.0"

# The process that started this one, read as early as this package is imported:
# the shim's watchdog (exai.shim.watchdog) compares against it, so an IDE that
# dies while the shim is still starting up is noticed too.
PARENT_AT_START = _os.getppid()

__all__ = ["__version__"]
