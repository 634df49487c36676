"""Callers' tool parameter schemas, as a stricter vendor accepts them.

Agents send the JSON Schemas of their own tools (and of the MCP servers they
use) unchanged, and many of those are valid JSON Schema that Moonshot refuses:
a property with an ``enum`` but no ``type`` ("At path 'properties.X': type is
not defined"), or ``$ref`` indirections into ``$defs``/``definitions``.
Moonshot's own client patches them before sending (kimi-cli, kosong's
``_convert_tool``: "Inline local refs, then patch missing types locally so such
tools keep working against Kimi"), and so does exai, the same way:

- local ``$ref``\\ s (``#/$defs/X``, ``#/definitions/X``) are inlined and the
  definition buckets dropped; a reference that loops back on itself is left as
  an object, since inlining it would never end;
- every schema under ``properties``, ``items``, ``additionalProperties`` and the
  members of ``anyOf``/``oneOf``/``allOf`` that has no ``type`` gets one: taken
  from its ``enum``/``const`` values where they have one JSON type, ``object``
  or ``array`` where it has ``properties`` or ``items``, else ``string``, the
  default Moonshot's client uses. A schema that is itself a combinator keeps no
  ``type``: its members carry them.

What the model may send is unchanged wherever the schema said what it was; an
untyped schema (any value) becomes a string one, which is how Moonshot's client
has it too. The input is never modified.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["moonshot_parameters"]

_COMBINATORS = ("anyOf", "oneOf", "allOf")
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"), (type(None), "null"))  # fmt: skip


def moonshot_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (a tool's ``parameters``) as Moonshot accepts it; a new object."""
    resolved = _inline_refs(copy.deepcopy(schema), schema, ())
    if not isinstance(resolved, dict):
        return schema
    resolved.pop("$defs", None)
    resolved.pop("definitions", None)
    _type_children(resolved)
    return resolved


def _lookup(root: dict[str, Any], ref: str) -> Any:
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _inline_refs(node: Any, root: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline_refs(item, root, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target = _lookup(root, ref)
        if isinstance(target, dict):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if ref in seen:  # recursive: an object of whatever shape
                return {"type": "object", **rest}
            merged = {**copy.deepcopy(target), **rest}
            return _inline_refs(merged, root, (*seen, ref))
    return {key: _inline_refs(value, root, seen) for key, value in node.items()}


def _type_of(values: list[Any]) -> str | None:
    kinds = set()
    for value in values:
        for python_type, name in _JSON_TYPES:
            if isinstance(value, python_type):  # bool before int: True is an int in Python
                kinds.add(name)
                break
    if kinds == {"integer", "number"}:
        return "number"
    return kinds.pop() if len(kinds) == 1 else None


def _ensure_type(node: dict[str, Any]) -> None:
    if "type" in node or any(k in node for k in (*_COMBINATORS, "$ref")):
        return
    values = list(node["enum"]) if isinstance(node.get("enum"), list) else []
    if "const" in node:
        values.append(node["const"])
    inferred = _type_of(values) if values else None
    if inferred is None:
        if "properties" in node:
            inferred = "object"
        elif "items" in node:
            inferred = "array"
        else:
            inferred = "string"
    node["type"] = inferred


def _type_children(node: dict[str, Any]) -> None:
    """Give every schema below ``node`` a type (``node`` itself is the caller's)."""
    children: list[Any] = []
    properties = node.get("properties")
    if isinstance(properties, dict):
        children += properties.values()
    for key in ("items", "additionalProperties"):
        value = node.get(key)
        children += value if isinstance(value, list) else [value]
    for key in _COMBINATORS:
        members = node.get(key)
        if isinstance(members, list):
            children += members
    for child in children:
        if isinstance(child, dict):
            _ensure_type(child)
            _type_children(child)
