"""exai: a tool daemon for Kimi and GLM models, spoken to over WebSocket or MCP."""

__version__ = "0.1.0"

__all__ = ["__version__"]
