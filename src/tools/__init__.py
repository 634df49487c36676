"""Tools: the registry, the per-call context, and the tools themselves."""

from exai.tools.base import Services, Tool, ToolContext, ToolResult
from exai.tools.registry import ToolRegistry

__all__ = ["Services", "Tool", "ToolContext", "ToolRegistry", "ToolResult"]
