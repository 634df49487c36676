"""The bridge: external MCP servers' tools served by the daemon as its own.

``config`` reads the servers file, ``names`` gives each tool a safe unique name,
``link`` keeps one server connected (restarting it with backoff), ``tool`` turns
its tools into daemon tools, and ``bridge`` keeps the registry in step.
"""

from exai.bridge.bridge import Bridge
from exai.bridge.config import BridgeConfig, BridgeConfigError, ServerConfig, load_config

__all__ = ["Bridge", "BridgeConfig", "BridgeConfigError", "ServerConfig", "load_config"]
