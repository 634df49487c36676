"""The settings checks ``exai serve`` and ``exai config`` share, beyond each value's type.

:func:`exai.settings.load_settings` checks every value on its own. What it
cannot check without the packages that read them is checked here, by the same
code those packages run at start-up: the model catalogue with
``EXAI_MODELS_FILE``, ``EXAI_ROUTING_RULES``, ``EXAI_MCP_SERVERS_FILE``, and
whether the models ``EXAI_DEFAULT_MODEL``, ``EXAI_FALLBACK_MODELS`` and the
routing rules name exist. So ``exai config`` refuses what ``exai serve`` would
refuse, with the same one line per setting.

A name the catalogue lacks may still be a model an OpenAI-compatible server
reports at start-up (``EXAI_OPENAI_COMPAT_BASE_URL`` without
``EXAI_OPENAI_COMPAT_MODELS``); such names are returned by :func:`check_settings`
as undecided, and ``exai serve`` looks them up once the providers have answered
(:func:`unknown_models`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from exai.settings import Settings, SettingsError

__all__ = ["check_settings", "model_names", "unknown_models"]


def model_names(settings: Settings, rules: Iterable[Any] = ()) -> list[tuple[str, str]]:
    """Every model a setting names, as ``(variable, name)``."""
    named = [("EXAI_DEFAULT_MODEL", settings.default_model)]
    named += [("EXAI_FALLBACK_MODELS", name) for name in settings.fallback_models]
    named += [("EXAI_ROUTING_RULES", rule.model) for rule in rules]
    return named


def check_settings(settings: Settings) -> list[tuple[str, str]]:
    """Raise :class:`SettingsError` (one line per problem) for what start-up would refuse.

    Returns the ``(variable, model)`` pairs that only the providers can settle (see
    the module's docstring).
    """
    from exai.providers.catalogue import CatalogueError, load_catalogue
    from exai.providers.routing import parse_rules

    problems: list[str] = []
    catalogue = rules = None
    try:
        catalogue = load_catalogue(settings.models_file)
    except CatalogueError as exc:
        problems.append(f"EXAI_MODELS_FILE: {exc}")
    try:
        rules = parse_rules(settings.routing_rules)
    except ValueError as exc:
        problems.append(f"EXAI_ROUTING_RULES: {exc}")
    if settings.mcp_servers_file is not None:
        from exai.bridge.config import BridgeConfigError, load_config

        try:
            load_config(settings.mcp_servers_file)
        except BridgeConfigError as exc:
            problems.append(f"EXAI_MCP_SERVERS_FILE: {exc}")
    undecided: list[tuple[str, str]] = []
    if catalogue is not None:
        discovers = bool(settings.openai_compat_base_url) and not settings.openai_compat_models
        listed = {m.lower() for m in settings.openai_compat_models}
        for variable, name in model_names(settings, rules or ()):
            problem = _model_problem(catalogue, variable, name, listed)
            if problem is None:
                continue
            if discovers and catalogue.retired(name) is None:
                undecided.append((variable, name))
            else:
                problems.append(problem)
    if problems:
        raise SettingsError(*problems)
    return undecided


def unknown_models(catalogue: Any, named: Iterable[tuple[str, str]]) -> list[str]:
    """The lines for the named models a (started) catalogue still does not know."""
    found = (_model_problem(catalogue, variable, name, set()) for variable, name in named)
    return [problem for problem in found if problem is not None]


def _model_problem(catalogue: Any, variable: str, name: str, listed: set[str]) -> str | None:
    name = name.strip()
    if variable == "EXAI_DEFAULT_MODEL" and name.lower() == "auto":
        return None
    if catalogue.get(name) is not None or name.lower() in listed:
        return None
    gone = catalogue.retired(name)
    if gone is not None:
        return f"{variable}: {gone.message(name)}"
    known = ", ".join(catalogue.names())
    also = ' or "auto"' if variable == "EXAI_DEFAULT_MODEL" else ""
    return f"{variable}: unknown model {name!r}; expected one of {known}{also}"
