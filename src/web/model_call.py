"""What every model face makes of a request: one ``completion`` call, and its notes.

The three model faces (OpenAI chat completions, the Anthropic Messages API, the
OpenAI Responses API) each translate their API's request into the arguments of
the one stateless tool under them, ``completion`` (:mod:`exai.tools.completion`),
and the answer back. Every field of a request is one of three things, and never a
fourth:

- **applied**: it becomes an argument of the call (``tools``, ``stop``...);
- **adapted**: exai serves it in a documented way that differs from the API's
  own (Anthropic's ``thinking.budget_tokens``, which Kimi and GLM have no knob
  for), and says so in the answer's ``exai.notes``. What the core adapts (an
  effort level a model takes as a thinking switch) it notes itself, and the
  answer carries those notes too;
- **refused**: a :class:`RequestRefused` naming the field, before any call.

A field a face does not know is refused too: nothing is accepted and ignored.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from exai.web.reasoning_seal import Carriers

__all__ = [
    "SESSION_HEADER",
    "TOOL",
    "ModelCall",
    "Note",
    "RequestRefused",
    "check_known",
    "client_name",
    "memory_on",
    "sessions_on",
    "want_bool",
    "want_dict",
    "want_list",
    "want_number",
    "want_str",
    "with_session",
]


TOOL = "completion"  # the tool every model face calls


@dataclass(frozen=True, slots=True)
class Note:
    """Something exai adapted to serve the request, reported in the answer."""

    param: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"param": self.param, "message": self.message}


class RequestRefused(Exception):
    """A request a model face refuses before any call: 400 unless ``status`` says.

    ``param`` names the field at fault in the API's own terms (``tools[3]``,
    ``messages[2].content[0]``); ``code`` is a short machine-readable reason.
    """

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = None, status: int = 400
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.status = status


@dataclass(frozen=True, slots=True)
class ModelCall:
    """The ``completion`` call that answers one request, and what the face needs to answer.

    ``face`` and ``model`` (as the request named it) go into the audit trail with
    ``client_ref``, the caller's own id for its end user or session when the API
    has one (``metadata.user_id``, ``user``, ``safety_identifier``...).
    """

    face: str
    arguments: dict[str, Any]
    model: str
    stream: bool = False
    notes: tuple[Note, ...] = ()
    client_ref: str | None = None
    tool: str = TOOL
    # Seals the reasoning the answer hands the client to bring back, and opens what it
    # brought (see exai.web.reasoning_seal); None on a face that hands none out.
    carriers: Carriers | None = None
    # The client's own reference for its session, when the API carries one (Claude
    # Code's session id in metadata.user_id, Codex's prompt_cache_key); an end user's
    # id (``user``) is not a session.
    session_ref: str | None = None
    # What keeps the request as a turn of its agent session (the ``session`` argument
    # of ``completion``): set by :func:`with_session`, None when it is not kept.
    session: dict[str, str | None] | None = None


def memory_on(principal: Any, faces_memory: Iterable[str]) -> bool:
    """Whether a principal's model-face requests bring its memories: its token's
    ``exai_memory`` claim, else EXAI_FACES_MEMORY (names, or ``*``)."""
    if getattr(principal, "memory", None) is not None:
        return bool(principal.memory)
    listed = set(faces_memory)
    return "*" in listed or principal.name in listed


SESSION_HEADER = "x-exai-session"
_CLIENTS = (  # User-Agent product tokens of the agents docs/agents.md configures
    ("claude-cli/", "Claude Code"),
    ("codex_", "Codex"),
    ("qwencode/", "qwen-code"),
    ("opencode/", "opencode"),
    ("openai-agents", "OpenAI Agents SDK"),
    ("anthropic/", "Anthropic SDK"),
    ("asyncanthropic/", "Anthropic SDK"),
    ("openai/", "OpenAI SDK"),
    ("asyncopenai/", "OpenAI SDK"),
)
_PRODUCT = re.compile(r"^([A-Za-z0-9._-]{1,48})(?:/(\d[A-Za-z0-9._+-]{0,23}))?")
_VERSION = re.compile(r"^\d[A-Za-z0-9._+-]{0,23}$")


def client_name(headers: Mapping[str, str]) -> str | None:
    """The client a request came from, for people to read: a known agent's name and
    version ("Claude Code 2.1.3"), else the User-Agent's first product token. The
    official SDKs name their version in ``x-stainless-package-version``."""
    user_agent = (headers.get("user-agent") or "").strip()
    match = _PRODUCT.match(user_agent)
    if match is None:
        return None
    version = match.group(2) or headers.get("x-stainless-package-version", "")
    version = version if _VERSION.match(version) else ""
    lowered = user_agent.lower()
    name = next((n for prefix, n in _CLIENTS if lowered.startswith(prefix)), match.group(1))
    return f"{name} {version}" if version else name


def sessions_on(principal: Any, faces_sessions: Iterable[str]) -> bool:
    """Whether a principal's model-face requests are kept as agent sessions: its
    token's ``exai_sessions`` claim, else EXAI_FACES_SESSIONS (names, ``*``, or ``none``:
    an empty variable is read as unset, so "no one" needs a word)."""
    if getattr(principal, "sessions", None) is not None:
        return bool(principal.sessions)
    listed = set(faces_sessions)
    return "none" not in listed and ("*" in listed or principal.name in listed)


def with_session(
    call: ModelCall, headers: Mapping[str, str], principal: Any, faces_sessions: Iterable[str]
) -> ModelCall:
    """The call with what keeps it as a turn of its agent session, unless the principal
    keeps none or the request says ``X-Exai-Session: off``. The header's other values
    name the session (over the API's own reference)."""
    asked = (headers.get(SESSION_HEADER) or "").strip()
    if call.tool != TOOL or asked.lower() == "off" or not sessions_on(principal, faces_sessions):
        return call
    session = {"face": call.face, "client": client_name(headers),
               "ref": asked[:256] or call.session_ref}  # fmt: skip
    return replace(call, session=session)


def check_known(body: Mapping[str, Any], known: Iterable[str], where: str = "") -> None:
    """Refuse the first field of ``body`` not in ``known`` (a null value counts as unset)."""
    allowed = set(known)
    for key, value in body.items():
        if key not in allowed and value is not None:
            raise RequestRefused(
                f"exai does not serve the field {where}{key}; leave it out (served: "
                f"{', '.join(sorted(allowed))})",
                param=f"{where}{key}",
                code="unsupported_parameter",
            )


def want_dict(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestRefused(f"{param} must be an object", param=param)
    return value


def want_list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise RequestRefused(f"{param} must be an array", param=param)
    return value


def want_str(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise RequestRefused(f"{param} must be a string", param=param)
    return value


def want_bool(value: Any, param: str) -> bool:
    if not isinstance(value, bool):
        raise RequestRefused(f"{param} must be true or false", param=param)
    return value


def want_number(value: Any, param: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestRefused(f"{param} must be a number", param=param)
    return value
