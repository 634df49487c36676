"""Model providers: the plugin interface, the built-in plugins and the registry.

Tools use :class:`ProviderRegistry` (resolve a model, then complete or stream a
:class:`ChatRequest`); plugins implement :class:`Provider` and are found through
the ``exai.providers`` entry-point group.
"""

from exai.providers.base import ChatRequest, ChatResponse, Delta, Provider, Usage
from exai.providers.catalogue import Catalogue, CatalogueError, ModelInfo, load_catalogue
from exai.providers.registry import ProviderRegistry
from exai.providers.retry import RetryPolicy
from exai.providers.routing import ModelNeeds

__all__ = [
    "Catalogue",
    "CatalogueError",
    "ChatRequest",
    "ChatResponse",
    "Delta",
    "ModelInfo",
    "ModelNeeds",
    "Provider",
    "ProviderRegistry",
    "RetryPolicy",
    "Usage",
    "load_catalogue",
]
