"""How ``model: "auto"`` becomes one model: routing rules first, then a ranking.

The choice is a pure function of the request's :class:`ModelNeeds`, the rules,
the catalogue and which providers are configured, so the same request always
lands on the same model and the choice can be tested without a network.

Rules come from ``EXAI_ROUTING_RULES``: a JSON list of ``{"when": {...},
"model": "..."}`` tried in order. ``when`` names fields of :class:`ModelNeeds`;
a rule matches when every field named matches: booleans and strings by
equality (a list of strings means any of them), ``min_context_tokens`` when
the request needs at least that many. ``{}`` matches everything. A matching
rule is binding: if its model cannot serve the request the call fails rather
than quietly going elsewhere, because rules exist for things like "sensitive
requests stay on the local model".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from exai.errors import ContextTooLongError, ExaiError, ProviderError, ValidationError_
from exai.providers.catalogue import ModelInfo

__all__ = [
    "ModelNeeds",
    "RoutingRule",
    "no_model_error",
    "parse_rules",
    "rank_models",
    "shortfalls",
]


@dataclass(frozen=True, slots=True)
class ModelNeeds:
    """What a call needs from its model, as the tool knows it before choosing."""

    web_search: bool = False
    thinking: bool = False
    images: bool = False
    min_context_tokens: int = 0
    sensitive: bool = False
    tool: str | None = None


_NEED_FIELDS = {f.name for f in fields(ModelNeeds)}


@dataclass(frozen=True, slots=True)
class RoutingRule:
    when: Mapping[str, Any]
    model: str

    def matches(self, needs: ModelNeeds) -> bool:
        for key, wanted in self.when.items():
            actual = getattr(needs, key)
            if key == "min_context_tokens":
                if actual < int(wanted):
                    return False
            elif isinstance(wanted, list):
                if actual not in wanted:
                    return False
            elif actual != wanted:
                return False
        return True

    def describe(self) -> str:
        return f"routing rule {json.dumps({'when': dict(self.when), 'model': self.model})}"


def parse_rules(text: str) -> list[RoutingRule]:
    """Rules from their JSON text; raises ValueError saying what is wrong."""
    if not text.strip():
        return []
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(raw, list):
        raise ValueError('must be a JSON list of {"when": {...}, "model": "..."}')
    rules = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("model"), str):
            raise ValueError(f'rule {i}: needs a string "model"')
        when = item.get("when", {})
        if not isinstance(when, dict):
            raise ValueError(f'rule {i}: "when" must be an object')
        unknown = set(when) - _NEED_FIELDS
        if unknown:
            raise ValueError(
                f"rule {i}: unknown conditions {sorted(unknown)}; known: {sorted(_NEED_FIELDS)}"
            )
        if item["model"].strip().lower() == "auto":
            raise ValueError(f'rule {i}: must name a model, not "auto"')
        extra = set(item) - {"when", "model"}
        if extra:
            raise ValueError(f"rule {i}: unknown keys {sorted(extra)}")
        rules.append(RoutingRule(when=dict(when), model=item["model"]))
    return rules


def shortfalls(info: ModelInfo, needs: ModelNeeds, *, context: bool = True) -> list[str]:
    """The hard needs ``info`` cannot meet, in words (empty when it meets them all).

    ``context=False`` leaves the context window out, for a model the caller named
    explicitly: history assembly trims to whatever window it has.
    """
    missing = []
    if needs.web_search and not info.web_search:
        missing.append("web search")
    if needs.images and not info.images:
        missing.append("image input")
    if context and needs.min_context_tokens > info.context_window:
        missing.append(f"a context window of {needs.min_context_tokens} tokens")
    return missing


def rank_models(candidates: Iterable[ModelInfo], needs: ModelNeeds) -> list[ModelInfo]:
    """Models able to serve ``needs`` that may be picked automatically, best first.

    Thinking is a preference, not a requirement: reasoning models come first when
    it is asked for. Then the catalogue's ``auto_rank``, then the name, so that
    ties never depend on the order providers were loaded in.
    """
    eligible = [
        info for info in candidates if info.auto_rank is not None and not shortfalls(info, needs)
    ]
    return sorted(
        eligible,
        key=lambda m: (needs.thinking and not m.supports_thinking, m.auto_rank, m.name),
    )


def no_model_error(usable: list[ModelInfo], needs: ModelNeeds, setup_hints: list[str]) -> ExaiError:
    """Why ``"auto"`` found nothing, as the error the caller should see."""
    if not usable:
        return ProviderError(
            "no model provider is configured; " + "; or ".join(setup_hints), retryable=False
        )
    if not rank_models(usable, replace(needs, min_context_tokens=0)):
        wanted = [word for word, on in (("web search", needs.web_search),
                                        ("image input", needs.images)) if on]  # fmt: skip
        return ValidationError_(f"no configured model offers {' and '.join(wanted)}")
    largest = max(usable, key=lambda m: m.context_window)
    return ContextTooLongError(
        f"no configured model has a context window of {needs.min_context_tokens} tokens; "
        f"the largest is {largest.name} with {largest.context_window}"
    )
