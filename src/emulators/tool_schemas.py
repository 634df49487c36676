"""Moonshot's check of a function tool's parameter schema. A TEST FIXTURE.

Moonshot rejects a tool whose parameter schema has a property without ``type``
(an enum-only property, as some MCP servers expose), with HTTP 400 and
"At path 'properties.X': type is not defined". Source: Moonshot's own client,
kimi-cli ``packages/kosong/src/kosong/chat_provider/kimi.py`` (``_convert_tool``:
"Moonshot's API rejects parameter schemas whose nested properties omit `type`")
and ``kosong/utils/jsonschema.py`` (``ensure_property_types``, whose docstring
quotes the 400), commit 995a180e, 2026-04-23. JSON Schema itself, OpenAI and
Anthropic accept such properties; Z.ai is not known to check, and the emulator
does not check GLM requests.

Which nodes are property schemas is taken from ``ensure_property_types``: those
under ``properties``, ``items`` (one schema or a list), ``additionalProperties``
and the members of ``anyOf``/``oneOf``/``allOf``, recursively; the root
(``parameters`` itself) is a container and is not checked. A node that uses
``anyOf``/``oneOf``/``allOf``/``$ref`` declares its shape without ``type`` and is
exempt (its members are still checked). The path is dotted from the parameters
root (``properties.mode``, ``properties.files.items``,
``properties.x.anyOf.0``); Moonshot's wording for paths below the first level
was not found, so the deeper paths follow the same pattern by inference.
"""

from __future__ import annotations

from typing import Any

__all__ = ["untyped_property"]

_COMBINATORS = ("anyOf", "oneOf", "allOf", "$ref")


def untyped_property(tools: list[Any]) -> str | None:
    """Moonshot's error message for the first function tool with an untyped
    property, else None."""
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        function = tool.get("function")
        parameters = function.get("parameters") if isinstance(function, dict) else None
        if isinstance(parameters, dict):
            path = _container(parameters, "")
            if path is not None:
                return f"At path '{path}': type is not defined"
    return None


def _join(base: str, key: str) -> str:
    return f"{base}.{key}" if base else key


def _container(node: dict[str, Any], at: str) -> str | None:
    """The path of the first untyped property schema inside ``node``."""
    children: list[tuple[str, Any]] = []
    properties = node.get("properties")
    if isinstance(properties, dict):
        children += [(_join(at, f"properties.{k}"), v) for k, v in properties.items()]
    items = node.get("items")
    if isinstance(items, dict):
        children.append((_join(at, "items"), items))
    elif isinstance(items, list):
        children += [(_join(at, f"items.{i}"), v) for i, v in enumerate(items)]
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        children.append((_join(at, "additionalProperties"), additional))
    for key in ("anyOf", "oneOf", "allOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            children += [(_join(at, f"{key}.{i}"), v) for i, v in enumerate(branches)]
    for path, child in children:
        found = _property(child, path)
        if found is not None:
            return found
    return None


def _property(node: Any, at: str) -> str | None:
    if not isinstance(node, dict):
        return None
    if "type" not in node and not any(key in node for key in _COMBINATORS):
        return at
    return _container(node, at)
