"""The model catalogue: what each model accepts, loaded from data and validated.

The facts about models (context windows, output limits, capabilities, aliases)
change more often than the code, so they live in ``models.toml`` beside this
module, and an operator can override or extend them with their own file
(``EXAI_MODELS_FILE``) without a release. Both are validated on load; a mistake
stops start-up with a :class:`CatalogueError` naming the file, model and field.

Prices are data too: a model's ``price`` sub-table (see
:class:`~exai.providers.pricing.Price`) gives its rates per million tokens. A
user file's ``price`` table changes only the rates it names, like any other field,
unless it names another currency: then it replaces the shipped price whole.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from exai.providers.base import EFFORTS, ChatRequest
from exai.providers.pricing import Price

__all__ = [
    "Catalogue",
    "CatalogueError",
    "ModelInfo",
    "ProviderDefaults",
    "RetiredModel",
    "load_catalogue",
]

ThinkingMode = Literal["none", "always", "switchable"]

# Who retires a provider's models, as users know the vendor.
_VENDOR_NAMES = {"kimi": "Moonshot", "glm": "Z.ai"}


class CatalogueError(ValueError):
    """The catalogue or the override file is malformed."""


class ModelInfo(BaseModel):
    """One model and what it accepts. Immutable and shared by all calls."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    provider: str
    model_id: str
    context_window: int = Field(gt=0)
    max_output_tokens: int = Field(gt=0)
    thinking: ThinkingMode = "none"
    web_search: bool = False
    images: bool = False
    temperature: tuple[float, float] = (0.0, 1.0)
    default_temperature: float | None = None
    fixed_temperature: bool = False
    aliases: tuple[str, ...] = ()
    auto_rank: int | None = None
    price: Price | None = None  # None: unpriced, and its calls report no cost
    # The API fixes top_p at this value and refuses any other (None: the caller's
    # top_p is sent); see exai.providers.params.
    fixed_top_p: float | None = Field(default=None, gt=0, le=1)
    # The vendor streams a tool call's arguments as they are written only when asked
    # (Z.ai's tool_stream); without it they arrive whole, in one piece.
    tool_stream: bool = False
    # The levels the API's ``reasoning_effort`` takes, least to most (empty: the model
    # has no such knob, only the thinking switch, if any), and the vendor's default.
    reasoning_efforts: tuple[str, ...] = ()
    default_effort: str | None = None
    # The vendor wants the reasoning of every earlier assistant message back, as it
    # was (Moonshot's Preserved Thinking, always on for K2.7 Code), not only that of
    # tool-call rounds; see exai.providers.reasoning.
    preserved_thinking: bool = False
    # tool_choice values the model takes while it thinks, where it differs from its
    # vendor's rule (ParamSupport.tool_choice_thinking): K3 takes a forced choice.
    tool_choice_thinking: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModelInfo:
        low, high = self.temperature
        if low > high:
            raise ValueError(f"temperature range [{low}, {high}] is empty")
        if self.default_temperature is not None and not low <= self.default_temperature <= high:
            raise ValueError("default_temperature lies outside the temperature range")
        if self.max_output_tokens > self.context_window:
            raise ValueError("max_output_tokens exceeds context_window")
        unknown = [e for e in self.reasoning_efforts if e not in EFFORTS]
        if unknown:
            raise ValueError(f"reasoning_efforts {unknown} are not among {list(EFFORTS)}")
        if list(self.reasoning_efforts) != sorted(self.reasoning_efforts, key=EFFORTS.index):
            raise ValueError(f"reasoning_efforts are listed least to most: {list(EFFORTS)}")
        if self.default_effort is not None and self.default_effort not in self.reasoning_efforts:
            raise ValueError("default_effort is not among reasoning_efforts")
        return self

    @property
    def supports_thinking(self) -> bool:
        return self.thinking != "none"

    def thinks(self, requested: bool | None) -> bool:
        """Whether a call with this thinking switch (None: the model's default)
        reasons. Every switchable model in the catalogue thinks unless told not to
        (or, like GLM-4.6, may decide to), so its reasoning is treated as present."""
        if self.thinking == "switchable":
            return requested is not False
        return self.thinking == "always"

    def describe(self) -> dict[str, Any]:
        """What ``listmodels`` shows about the model."""
        return {
            "name": self.name,
            "provider": self.provider,
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "thinking": self.supports_thinking,
            "thinking_mode": self.thinking,
            "reasoning_efforts": list(self.reasoning_efforts),
            "default_effort": self.default_effort,
            "preserved_thinking": self.preserved_thinking,
            "web_search": self.web_search,
            "images": self.images,
            "aliases": list(self.aliases),
            "price": self.price.describe() if self.price is not None else None,
        }

    def fit(self, request: ChatRequest) -> ChatRequest:
        """The request as this model accepts it: its own id, parameters in range,
        and nothing the API would reject (a thinking switch it does not have)."""
        temperature = request.temperature
        if temperature is None:
            temperature = self.default_temperature
        if self.fixed_temperature:
            temperature = None
        if temperature is not None:
            low, high = self.temperature
            temperature = min(max(temperature, low), high)
        max_out = request.max_output_tokens
        if max_out is not None:
            max_out = min(max_out, self.max_output_tokens)
        return dataclasses.replace(
            request,
            model=self.model_id,
            temperature=temperature,
            max_output_tokens=max_out,
            thinking=request.thinking if self.thinking == "switchable" else None,
            thinks=self.thinks(request.thinking),
            web_search=request.web_search and self.web_search,
        )


class RetiredModel(BaseModel):
    """A model its vendor has withdrawn, kept so that asking for it says what to use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    provider: str
    successor: str
    aliases: tuple[str, ...] = ()

    def message(self, asked: str) -> str:
        vendor = _VENDOR_NAMES.get(self.provider, self.provider)
        return f"{asked} was retired by {vendor}; use {self.successor}"


class ProviderDefaults(BaseModel):
    """What to assume about a model a provider reports but the catalogue omits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    context_window: int = Field(default=8192, gt=0)
    max_output_tokens: int = Field(default=2048, gt=0)
    temperature: tuple[float, float] = (0.0, 1.0)

    def model(self, provider: str, model_id: str) -> ModelInfo:
        return ModelInfo(
            name=model_id,
            provider=provider,
            model_id=model_id,
            context_window=self.context_window,
            max_output_tokens=min(self.max_output_tokens, self.context_window),
            temperature=self.temperature,
        )


class Catalogue:
    """Models by name and alias (case-insensitive), in a stable order."""

    def __init__(
        self,
        models: Iterable[ModelInfo],
        provider_defaults: Mapping[str, ProviderDefaults] | None = None,
        retired: Iterable[RetiredModel] = (),
    ) -> None:
        self._models: dict[str, ModelInfo] = {}
        self._retired: dict[str, RetiredModel] = {}
        self._index: dict[str, str] = {}
        self._defaults = dict(provider_defaults or {})
        for info in models:
            self.add(info)
        for gone in retired:
            self.add_retired(gone)

    def _claim(self, name: str, aliases: Iterable[str]) -> None:
        for key in (name, *aliases):
            owner = self._index.get(key.lower())
            if owner is not None and owner != name:
                raise CatalogueError(f"name {key!r} of model {name!r} is already {owner!r}")
        for key in (name, *aliases):
            self._index[key.lower()] = name

    def add(self, info: ModelInfo) -> None:
        self._claim(info.name, info.aliases)
        self._models[info.name] = info

    def add_retired(self, gone: RetiredModel) -> None:
        """Record a retired model; its successor must be a current model here."""
        if gone.successor not in self._models:
            raise CatalogueError(
                f"retired model {gone.name!r} names successor {gone.successor!r}, which is "
                "not a current model of the catalogue"
            )
        self._claim(gone.name, gone.aliases)
        self._retired[gone.name] = gone

    def add_discovered(self, provider: str, model_ids: Iterable[str]) -> list[str]:
        """Add models a provider reported at run time; returns the names added.

        A model the catalogue already describes keeps its entry; an id that is
        already another model's name or alias is skipped rather than shadowing it.
        """
        defaults = self._defaults.get(provider) or self._defaults.get("default", ProviderDefaults())
        added = []
        for model_id in model_ids:
            if model_id.lower() in self._index:
                continue
            self.add(defaults.model(provider, model_id))
            added.append(model_id)
        return added

    def get(self, name: str) -> ModelInfo | None:
        key = self._index.get(name.strip().lower())
        return self._models.get(key) if key is not None else None

    def retired(self, name: str) -> RetiredModel | None:
        """The retired model ``name`` (or one of its aliases) stands for, if any."""
        key = self._index.get(name.strip().lower())
        return self._retired.get(key) if key is not None else None

    def names(self) -> list[str]:
        return list(self._models)

    def __iter__(self) -> Iterator[ModelInfo]:
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)


def load_catalogue(override: Path | None = None) -> Catalogue:
    """The built-in catalogue, with the user's override file applied when given."""
    text = resources.files("exai.providers").joinpath("models.toml").read_text("utf-8")
    data = _parse(text, "models.toml (built in)")
    if override is not None:
        try:
            user_text = Path(override).expanduser().read_text("utf-8")
        except OSError as exc:
            raise CatalogueError(f"cannot read models file {override}: {exc}") from None
        user = _parse(user_text, str(override))
        data = _merge(data, user, str(override))
    return _build(data)


def _parse(text: str, origin: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{origin}: not valid TOML: {exc}") from None
    unknown = set(data) - {"models", "provider_defaults"}
    if unknown:
        raise CatalogueError(f"{origin}: unknown top-level tables {sorted(unknown)}")
    for table in ("models", "provider_defaults"):
        section = data.setdefault(table, {})
        if not isinstance(section, dict) or not all(isinstance(v, dict) for v in section.values()):
            raise CatalogueError(f"{origin}: [{table}] must hold one table per entry")
    data["_origin"] = {name: origin for name in data["models"]}
    return data


def _merge(base: dict[str, Any], user: dict[str, Any], origin: str) -> dict[str, Any]:
    """Field-by-field: a user entry for a known model changes only the fields it names."""
    models = {name: dict(entry) for name, entry in base["models"].items()}
    origins = dict(base["_origin"])
    for name, entry in user["models"].items():
        merged = {**models.get(name, {}), **entry}
        base_price, user_price = models.get(name, {}).get("price"), entry.get("price")
        # Rates in one currency mean nothing in another: a price in a new currency
        # replaces the shipped one whole.
        if (isinstance(base_price, dict) and isinstance(user_price, dict)
                and user_price.get("currency", base_price.get("currency"))
                == base_price.get("currency")):  # fmt: skip
            merged["price"] = {**base_price, **user_price}
        models[name] = merged
        origins[name] = origin
    defaults = {name: dict(entry) for name, entry in base["provider_defaults"].items()}
    for name, entry in user["provider_defaults"].items():
        defaults[name] = {**defaults.get(name, {}), **entry}
    return {"models": models, "provider_defaults": defaults, "_origin": origins}


def _build(data: dict[str, Any]) -> Catalogue:
    defaults: dict[str, ProviderDefaults] = {}
    for name, entry in data["provider_defaults"].items():
        try:
            defaults[name] = ProviderDefaults(**entry)
        except ValidationError as exc:
            raise CatalogueError(f"provider_defaults.{name}: {_explain(exc)}") from None
    models: list[ModelInfo] = []
    retired: list[RetiredModel] = []
    for name, entry in data["models"].items():
        entry = dict(entry)
        gone = entry.pop("retired", False)
        try:
            if not isinstance(gone, bool):
                raise TypeError(f"retired must be true or false, not {gone!r}")
            if gone:
                retired.append(RetiredModel(name=name, provider=entry.get("provider", ""),
                                            successor=entry.get("successor", ""),
                                            aliases=entry.get("aliases", ())))  # fmt: skip
                continue
            entry.pop("successor", None)  # an override file brought a retired model back
            models.append(ModelInfo(**{"model_id": name, **entry, "name": name}))
        except (ValidationError, TypeError) as exc:
            detail = _explain(exc) if isinstance(exc, ValidationError) else str(exc)
            raise CatalogueError(f"{data['_origin'][name]}: model {name!r}: {detail}") from None
    catalogue = Catalogue(models, defaults)
    for gone_model in retired:
        try:
            catalogue.add_retired(gone_model)
        except CatalogueError as exc:
            raise CatalogueError(f"{data['_origin'][gone_model.name]}: {exc}") from None
    return catalogue


def _explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "entry"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
