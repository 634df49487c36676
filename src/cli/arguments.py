"""``key=value`` on the command line, read as the tool's schema wants it.

A value is read as JSON when it parses (``3``, ``true``, ``["a.py"]``,
``{"k": 1}``) and taken as text otherwise, except where the tool's input schema
wants text and not what the JSON reading gave: ``prompt=42`` is the prompt
"42", ``stream_chunks=3`` the number 3. This is a pure function of the pairs
and the schema; :mod:`exai.cli.call` fetches the schema.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["describe_schema", "parse_assignments"]

_JSON_TYPES: dict[type, tuple[str, ...]] = {
    str: ("string",),
    bool: ("boolean",),
    int: ("integer", "number"),
    float: ("number",),
    list: ("array",),
    dict: ("object",),
    type(None): ("null",),
}


def parse_assignments(pairs: list[str], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """``["a=1", "b=text"]`` -> ``{"a": 1, "b": "text"}``; raises ValueError on a pair
    without ``=``."""
    properties = (schema or {}).get("properties") or {}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        wanted = properties.get(key)
        if not isinstance(value, str) and wanted is not None:
            types = _types(wanted)
            if "string" in types and not _accepts(types, value):
                value = text
        out[key] = value
    return out


def _types(schema: Any) -> set[str]:
    """The JSON types a (pydantic-generated) property schema admits; empty: any."""
    if not isinstance(schema, dict):
        return set()
    found: set[str] = set()
    kind = schema.get("type")
    if isinstance(kind, str):
        found.add(kind)
    elif isinstance(kind, list):
        found.update(k for k in kind if isinstance(k, str))
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            found |= _types(option)
    if "enum" in schema and not found:
        found.update(t for v in schema["enum"] for t in _JSON_TYPES.get(type(v), ()))
    return found


def _accepts(types: set[str], value: Any) -> bool:
    return not types or any(t in types for t in _JSON_TYPES.get(type(value), ()))


def describe_schema(schema: dict[str, Any]) -> list[str]:
    """A tool's arguments as lines: name, type, required or default, description."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    width = max((len(name) for name in properties), default=0) + 4
    lines = []
    for name, prop in properties.items():
        name = f"  {name}"
        kinds = sorted(_types(prop) - {"null"}) or ["any"]
        if isinstance(prop, dict) and prop.get("enum"):
            kinds = ["|".join(str(v) for v in prop["enum"])]
        if name.strip() in required:
            need = "required"
        elif isinstance(prop, dict) and "default" in prop:
            need = f"default {json.dumps(prop['default'])}"
        else:
            need = "optional"
        description = prop.get("description", "") if isinstance(prop, dict) else ""
        line = f"{name.ljust(width)}({'/'.join(kinds)}, {need})"
        lines.append(f"{line}  {description}" if description else line)
    return lines
