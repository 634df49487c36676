"""Valid arguments for any tool, built from its ``inputSchema``; which inputs are paths.

The security tests cover every tool the registry lists when they run, including
tools added after they were written, so they cannot hard-code arguments. This
builds the smallest valid call from a tool's JSON Schema: each required property
gets a plain value of its type (the first enum member, the minimum of a number, a
model the emulator serves for anything called ``model``), and array items get
distinct enum members so that "each once" constraints hold. A security test
checks that such a call succeeds before it attacks the tool, so a tool these
rules cannot satisfy fails loudly instead of being skipped.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PATH_FIELD", "minimal_arguments", "path_fields"]

MODEL = "kimi-k2.6"
# Inputs that name files or directories: files, relevant_files, files_checked, path, ...
PATH_FIELD = re.compile(r"(^|_)(files?|paths?|dir|directory|folder)(_|$)")

_TEXT_HINTS = {
    "prompt": "Review this carefully.",
    "step": "Investigate the code.",
    "findings": "Nothing unusual yet.",
}


def path_fields(schema: dict[str, Any]) -> dict[str, str]:
    """Path-taking properties: name -> "array" (a list of paths) or "string" (one path)."""
    out: dict[str, str] = {}
    for name, prop in schema.get("properties", {}).items():
        if not PATH_FIELD.search(name):
            continue
        prop = _plain(prop, schema)
        if (
            prop.get("type") == "array"
            and _plain(prop.get("items", {}), schema).get("type") == "string"
        ):
            out[name] = "array"
        elif prop.get("type") == "string":
            out[name] = "string"
    return out


def minimal_arguments(schema: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """The required properties with plain values, then ``overrides`` on top."""
    args = _object(schema, schema, index=0, given=set(overrides))
    args.update(overrides)
    return args


def _plain(prop: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """``prop`` with ``$ref`` resolved and ``anyOf``/``oneOf`` reduced to a non-null branch."""
    while True:
        if "$ref" in prop:
            name = prop["$ref"].rsplit("/", 1)[-1]
            prop = {**root.get("$defs", {})[name], **{k: v for k, v in prop.items() if k != "$ref"}}
            continue
        for key in ("anyOf", "oneOf"):
            if key in prop:
                branches = [b for b in prop[key] if b.get("type") != "null"]
                prop = {**{k: v for k, v in prop.items() if k != key}, **branches[0]}
                break
        else:
            return prop


def _object(
    schema: dict[str, Any], root: dict[str, Any], index: int, given: set[str] | None = None
) -> dict[str, Any]:
    props = schema.get("properties", {})
    out = {
        name: _value(name, props[name], root, index)
        for name in schema.get("required", [])
        if name not in (given or ())
    }
    if index:
        # Items after the first differ in every enum they have, required or not.
        for name, prop in props.items():
            plain = _plain(prop, root)
            if name not in out and "enum" in plain:
                out[name] = plain["enum"][index % len(plain["enum"])]
    return out


def _value(name: str, prop: dict[str, Any], root: dict[str, Any], index: int) -> Any:
    prop = _plain(prop, root)
    if "const" in prop:
        return prop["const"]
    if "enum" in prop:
        return prop["enum"][index % len(prop["enum"])]
    kind = prop.get("type")
    if kind == "string":
        if name == "model" or name.endswith("_model"):
            return MODEL
        if "pattern" in prop:
            raise ValueError(f"cannot make up a value for {name!r} (pattern {prop['pattern']})")
        text = _TEXT_HINTS.get(name, "x")
        return text.ljust(int(prop.get("minLength", 1)), "x")
    if kind in ("integer", "number"):
        if "minimum" in prop:
            return prop["minimum"]
        if "exclusiveMinimum" in prop:
            return prop["exclusiveMinimum"] + 1
        return 1
    if kind == "boolean":
        return False
    if kind == "array":
        items = prop.get("items", {})
        return [_value(name, items, root, i) for i in range(int(prop.get("minItems", 0)))]
    if kind == "object":
        return _object(prop, root, index)
    raise ValueError(f"cannot make up a value for {name!r} of type {kind!r}")
