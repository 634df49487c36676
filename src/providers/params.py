"""A caller's request fitted to one model: what is sent, what is adapted, what is refused.

Pure decisions, made before anything is sent. The model's own limits come from
the catalogue (:class:`~exai.providers.catalogue.ModelInfo`: temperature range,
fixed top_p, output limit, thinking switch), its vendor's from the plugin's
:class:`~exai.providers.base.ParamSupport`. For each parameter exai either

- sends it as given;
- adapts the request in a way that still gives the caller what it asked for, and
  says so in a note (``{"param", "message"}``, returned with the answer): a
  ``tool_choice: "none"`` the vendor does not take becomes a request without
  tools; a forced tool choice (``"required"`` or a named function) that Kimi
  refuses while its model thinks turns thinking off for that request, on a model
  whose thinking can be switched off and a caller that did not ask for thinking;
  a temperature the model sets itself, or one outside its range, is left out or
  brought into range;
- or refuses the request with a ``ValidationError_`` whose ``details["param"]``
  names the parameter (a top_p the model fixes at another value, a seed or a
  JSON schema the vendor has no parameter for, more stop sequences than it takes).

Nothing is accepted and then quietly dropped. :func:`vendor_fields` is the other
half: the fields a plugin puts in the request body for what passed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from exai.errors import ValidationError_
from exai.providers.base import EFFORTS, ChatRequest, ParamSupport
from exai.providers.catalogue import ModelInfo

__all__ = ["Fitted", "choice_kind", "fit_request", "note", "vendor_fields"]

_VENDORS = {"kimi": "Moonshot", "glm": "Z.ai"}


@dataclass(slots=True)
class Fitted:
    """The request as it will be sent to one model, and what was adapted to get there."""

    request: ChatRequest
    notes: list[dict[str, str]] = field(default_factory=list)


def note(param: str, message: str) -> dict[str, str]:
    return {"param": param, "message": message}


def choice_kind(choice: str | dict[str, Any] | None) -> str | None:
    """``"auto"``, ``"none"``, ``"required"``, ``"function"`` (a named function) or None."""
    if isinstance(choice, dict):
        return "function"
    return choice


def _refuse(param: str, message: str) -> ValidationError_:
    return ValidationError_(message, details={"param": param})


def fit_request(info: ModelInfo, request: ChatRequest, support: ParamSupport) -> Fitted:
    """``request`` as ``info``'s API takes it; raises ``ValidationError_`` naming the
    parameter when it cannot be served by this model."""
    if request.web_search and not info.web_search:
        raise _refuse("web_search", f"{info.name} cannot search the web; choose a model that can")
    fitted = Fitted(dataclasses.replace(info.fit(request), tool_stream=info.tool_stream,
                                        preserved_thinking=info.preserved_thinking))  # fmt: skip
    _note_fitted_basics(info, request, fitted)
    vendor = _VENDORS.get(info.provider, info.provider)
    _fit_effort(info, request, fitted)
    out = fitted.request
    if out.web_search and out.thinks and not support.web_search_thinking:
        _search_without_thinking(info, fitted, vendor)
    if out.top_p is not None and info.fixed_top_p is not None:
        if abs(out.top_p - info.fixed_top_p) > 1e-9:
            raise _refuse(
                "top_p",
                f"{info.name} fixes top_p at {info.fixed_top_p:g} and its "
                "vendor refuses any other value; leave top_p out or choose another "
                "model",
            )
        out.top_p = None  # what the model uses anyway
    if out.seed is not None and not support.seed:
        raise _refuse("seed", f"{vendor}'s API ({info.name}) has no seed parameter")
    if out.stop is not None:
        out.stop = _stops(info, out.stop, support)
    kind = (out.response_format or {}).get("type")
    if kind is not None and kind not in support.response_formats:
        raise _refuse(
            "response_format",
            f"{vendor}'s API ({info.name}) takes response_format "
            f"{_listed(support.response_formats)}, not {kind!r}",
        )
    _fit_tools(info, request, fitted, support, vendor)
    if out.tools and out.parallel_tool_calls is False and not support.parallel_tool_calls:
        # The vendors let the model call several tools at once and have no switch for it;
        # true asks for what they do anyway, false cannot be passed on.
        fitted.notes.append(
            note(
                "parallel_tool_calls",
                f"{vendor}'s API has no parallel_tool_calls switch; the model may still call "
                "several tools at once",
            )
        )
    return fitted


def _note_fitted_basics(info: ModelInfo, asked: ChatRequest, fitted: Fitted) -> None:
    """Notes for what :meth:`ModelInfo.fit` changed: temperature, output limit, thinking."""
    out = fitted.request
    if asked.temperature is not None and out.temperature != asked.temperature:
        if out.temperature is None:
            message = f"{info.name} sets its own temperature; {asked.temperature:g} was not sent"
        else:
            low, high = info.temperature
            message = (
                f"{asked.temperature:g} is outside {info.name}'s range [{low:g}, "
                f"{high:g}]; {out.temperature:g} was sent"
            )
        fitted.notes.append(note("temperature", message))
    if asked.max_output_tokens is not None and out.max_output_tokens != asked.max_output_tokens:
        fitted.notes.append(
            note(
                "max_tokens",
                f"{info.name} writes at most {info.max_output_tokens} tokens; that limit was sent",
            )
        )
    if asked.thinking is not None and out.thinking is None:
        always = info.thinking == "always"
        if asked.thinking != always:
            state = "always thinks" if always else "does not think"
            fitted.notes.append(note("thinking", f"{info.name} {state}; the switch was not sent"))


def _stops(info: ModelInfo, stops: list[str], support: ParamSupport) -> list[str] | None:
    if not stops:
        return None
    vendor = _VENDORS.get(info.provider, info.provider)
    if len(stops) > support.max_stop:
        raise _refuse(
            "stop",
            f"{vendor}'s API ({info.name}) takes at most {support.max_stop} "
            f"stop sequence(s), not {len(stops)}",
        )
    limit = support.max_stop_bytes
    if limit is not None and any(len(s.encode()) > limit for s in stops):
        raise _refuse(
            "stop",
            f"{vendor}'s API ({info.name}) takes stop sequences of at most {limit} bytes each",
        )
    return list(stops)


def _fit_tools(
    info: ModelInfo, asked: ChatRequest, fitted: Fitted, support: ParamSupport, vendor: str
) -> None:
    out = fitted.request
    kind = choice_kind(out.tool_choice)
    if kind is None:
        return
    names = {t.get("function", {}).get("name") for t in out.tools}
    if not out.tools:
        if kind in ("required", "function"):
            raise _refuse(
                "tool_choice", "tool_choice asks for a tool call, but no tools were given"
            )
        out.tool_choice = None  # "auto" and "none" mean the same without tools
        return
    if kind == "function":
        wanted = (out.tool_choice or {}).get("function", {}).get("name")
        if wanted not in names:
            raise _refuse(
                "tool_choice", f"tool_choice names {wanted!r}, which is not among the tools given"
            )
    if kind == "none" and "none" not in support.tool_choice:
        out.tools, out.tool_choice = [], None
        fitted.notes.append(
            note(
                "tool_choice",
                f"{vendor}'s API does not take tool_choice "
                '"none"; the tools were not sent, so the model could call '
                "none of them",
            )
        )
        return
    if kind not in support.tool_choice:
        raise _refuse(
            "tool_choice",
            f"{vendor}'s API ({info.name}) takes tool_choice {_listed(support.tool_choice)} only",
        )
    while_thinking = support.tool_choice_thinking
    if info.tool_choice_thinking is not None:
        while_thinking = frozenset(info.tool_choice_thinking)
    if out.thinks and while_thinking is not None and kind not in while_thinking:
        if info.thinking == "switchable" and asked.thinking is not True:
            out.thinking, out.thinks = False, False
            fitted.notes.append(
                note(
                    "thinking",
                    f"{vendor} refuses a forced tool_choice while "
                    f"{info.name} thinks; thinking was turned off for this "
                    "request",
                )
            )
        else:
            raise _refuse(
                "tool_choice",
                f"{vendor} refuses tool_choice {_shown(kind)} while "
                f"{info.name} thinks (it takes {_listed(while_thinking)}); turn "
                "thinking off, or let the model choose",
            )


# Effort levels that mean "no reasoning" to a model whose only knob is a switch.
_THINKING_OFF = ("none", "minimal")


def _fit_effort(info: ModelInfo, asked: ChatRequest, fitted: Fitted) -> None:
    """The caller's reasoning effort as ``info``'s own knob.

    A model with effort levels gets the nearest level at or above the one asked (the
    highest, if none is), as Moonshot itself runs K3's "medium" as "high". A model
    with only a thinking switch gets thinking off for "none" and "minimal" and on for
    the rest. Every change from what was asked is a note; an effort that contradicts
    the caller's own thinking switch is refused.
    """
    out = fitted.request
    effort = asked.reasoning_effort
    out.reasoning_effort = None
    if effort is None:
        return
    if effort not in EFFORTS:
        raise _refuse("reasoning_effort", f"reasoning_effort is one of {', '.join(EFFORTS)}")
    off = effort in _THINKING_OFF
    if asked.thinking is not None and asked.thinking == off:
        raise _refuse(
            "reasoning_effort",
            f"reasoning_effort {effort!r} contradicts thinking "
            f"{'on' if asked.thinking else 'off'}; send one of them",
        )
    levels = info.reasoning_efforts
    if not levels or (effort == "none" and "none" not in levels and info.thinking != "always"):
        _effort_as_switch(info, effort, off, fitted)
        return
    rank = EFFORTS.index(effort)
    chosen = next((lvl for lvl in levels if EFFORTS.index(lvl) >= rank), levels[-1])
    out.reasoning_effort = chosen
    if chosen == "none":
        out.thinks = False
    if chosen != effort:
        why = f"; {info.name} always reasons" if effort == "none" else ""
        fitted.notes.append(
            note(
                "reasoning_effort",
                f"{info.name} takes reasoning_effort {', '.join(levels)}; {effort!r} was sent "
                f"as {chosen!r}{why}",
            )
        )


def _effort_as_switch(info: ModelInfo, effort: str, off: bool, fitted: Fitted) -> None:
    """An effort level on a model whose only knob is a thinking switch (or none)."""
    out = fitted.request
    if info.thinking == "switchable":
        out.thinking = out.thinks = not off
        if effort != "none":
            fitted.notes.append(
                note(
                    "reasoning_effort",
                    f"{info.name} has no reasoning_effort, only a thinking switch; {effort!r} "
                    f"turned thinking {'off' if off else 'on, at its own depth'}",
                )
            )
        return
    if info.thinking == "none" and effort == "none":
        return  # exactly what the model does
    state = "does not think" if info.thinking == "none" else "always reasons at its own depth"
    fitted.notes.append(
        note(
            "reasoning_effort",
            f"{info.name} has no reasoning_effort and {state}; {effort!r} was not sent",
        )
    )


def _search_without_thinking(info: ModelInfo, fitted: Fitted, vendor: str) -> None:
    """Web search on a vendor whose search refuses a thinking model: thinking off for
    the request where it can be switched off and the caller did not ask for it."""
    out = fitted.request
    # The fitted request says what the caller asked for: its own thinking switch, or
    # an effort level as the model takes it (see _fit_effort); unset is the default.
    wanted = out.thinking is True or out.reasoning_effort not in (None, "none")
    if info.thinking == "switchable" and not wanted:
        out.thinking, out.thinks = False, False
        fitted.notes.append(note("thinking", f"{vendor}'s web search needs thinking off; "
                                 f"{info.name} answered this search without thinking"))  # fmt: skip
        return
    why = "it always thinks" if info.thinking == "always" else "thinking was asked for"
    raise _refuse("web_search", f"{vendor}'s web search needs thinking off, and {info.name} "
                  f"cannot search: {why}; turn web search off or choose a model that "
                  "can search without thinking")  # fmt: skip


def vendor_fields(
    request: ChatRequest, support: ParamSupport, *, tools_sent: bool
) -> dict[str, Any]:
    """The body fields for the parameters of a fitted request, OpenAI-named."""
    body: dict[str, Any] = {}
    if tools_sent and request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    if tools_sent and request.parallel_tool_calls is not None and support.parallel_tool_calls:
        body["parallel_tool_calls"] = request.parallel_tool_calls
    for name in ("stop", "top_p", "seed", "response_format", "reasoning_effort"):
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    return body


def _listed(values: frozenset[str]) -> str:
    return ", ".join(_shown(v) for v in sorted(values))


def _shown(kind: str) -> str:
    return "a named function" if kind == "function" else f'"{kind}"'
