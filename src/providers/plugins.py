"""Finding provider plugins through the ``exai.providers`` entry-point group.

Each entry point names a factory ``(settings) -> Provider``. The built-in
providers are registered the same way (see ``pyproject.toml``), so a third-party
provider installs like any package and needs no change here. A plugin that fails
to load is reported and skipped: one broken package must not stop the daemon.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from exai.logs import get_logger
from exai.providers.base import Provider

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["ENTRY_POINT_GROUP", "LoadedPlugins", "load_plugins"]

ENTRY_POINT_GROUP = "exai.providers"

log = get_logger("exai.providers")


@dataclass
class LoadedPlugins:
    providers: list[Provider] = field(default_factory=list)
    # entry point name -> why it could not be used
    failures: dict[str, str] = field(default_factory=dict)


def load_plugins(settings: Settings, group: str = ENTRY_POINT_GROUP) -> LoadedPlugins:
    loaded = LoadedPlugins()
    names: set[str] = set()
    for ep in sorted(entry_points(group=group), key=lambda ep: ep.name):
        try:
            provider = ep.load()(settings)
            if not isinstance(provider, Provider):
                raise TypeError(f"factory returned {type(provider).__name__}, not a Provider")
        except Exception as exc:
            loaded.failures[ep.name] = f"{type(exc).__name__}: {exc}"
            log.error("provider_plugin_failed", entry_point=ep.value, error=str(exc))
            continue
        if provider.name in names:
            loaded.failures[ep.name] = f"a provider named {provider.name!r} is already loaded"
            log.error("provider_plugin_duplicate", entry_point=ep.value, provider=provider.name)
            continue
        names.add(provider.name)
        loaded.providers.append(provider)
    return loaded
