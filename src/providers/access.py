"""Which models a caller may use: its allowance, as the catalogue names them.

A principal may be limited to some models (its key's ``models``, a JWT's
``exai_models`` claim, the operator's ``exai limits set --models``; combined in
:mod:`exai.accounting.limits`). The allowance reaches the providers with the call
(:meth:`~exai.providers.registry.ProviderRegistry.resolve`'s ``allowed``, a
:class:`~exai.providers.base.ChatRequest`'s ``allowed_models``) and is applied
where a model is chosen: a name or alias outside it is ``FORBIDDEN``; ``auto``
and the routing rules choose only inside it; a fallback outside it is skipped.
Names in an allowance may be aliases: they are read as the models they name.
"""

from __future__ import annotations

from collections.abc import Iterable

from exai.errors import ForbiddenError
from exai.providers.catalogue import Catalogue, ModelInfo

__all__ = ["canonical", "forbidden", "permits"]


def canonical(catalogue: Catalogue, allowed: Iterable[str]) -> frozenset[str]:
    """The catalogue's names of the models ``allowed`` names (an unknown name stays
    as it is, so a model added later under it is allowed)."""
    out = set()
    for name in allowed:
        info = catalogue.get(name)
        out.add(info.name if info is not None else name)
    return frozenset(out)


def permits(allowed: frozenset[str] | None, info: ModelInfo) -> bool:
    """Whether ``info`` is inside a canonical allowance (None: every model)."""
    return allowed is None or info.name in allowed


def forbidden(asked: str, info: ModelInfo, allowed: frozenset[str]) -> ForbiddenError:
    shown = ", ".join(sorted(allowed)) or "none"
    via = "" if asked.lower() == info.name.lower() else f" ({asked!r} is {info.name!r})"
    return ForbiddenError(
        f"model {info.name!r}{via} is not among the models this credential may use: {shown}",
        details={"model": info.name, "allowed_models": sorted(allowed)},
    )
