"""The model faces (/v1/chat/completions, /v1/messages, /v1/responses): keep-alive,
Anthropic model names, memory."""

from __future__ import annotations

from pydantic import BaseModel, field_validator

from exai.settings.fields import CommaList, group, list_field

__all__ = ["FacesSettings"]

_faces = group("model faces")


class FacesSettings(BaseModel):
    faces_ping_s: float = _faces(
        10.0,
        "A streamed answer of the model faces (/v1/chat/completions, /v1/messages, "
        "/v1/responses) or of the console's reply that has been quiet this long gets a "
        "keep-alive event, so no proxy's idle timeout cuts a long call.",
        gt=0,
    )
    anthropic_models: str = _faces(
        "claude-*=auto",
        "What the Anthropic face (/v1/messages) serves an Anthropic model name with: "
        "pattern=model pairs, comma-separated, tried in order (* and ? match any text, e.g. "
        "*haiku*=glm-4.5-air,claude-*=auto). A name no pattern matches is looked up as it is "
        "(kimi-k2.6, an alias, auto).",
    )
    faces_memory: CommaList = list_field(
        "model faces",
        "Principals whose requests to the model faces carry their relevant memories (a "
        "marked block before the last user message) and queue their messages for memory "
        "extraction, comma-separated; * is every principal. A JWT's exai_memory claim (true "
        "or false) wins. Empty: no memory on the model faces.",
    )

    faces_sessions: CommaList = list_field(
        "model faces",
        "Principals whose requests to the model faces are kept as agent sessions: each "
        "request that continues an earlier one becomes the next turn of its thread (see "
        "docs/agents.md#sessions), comma-separated; * is every principal. A JWT's "
        "exai_sessions claim (true or false) wins, and a request with the header "
        "X-Exai-Session: off is never kept. none: no request of the model faces is kept "
        "(an empty value means the default).",
        default_factory=lambda: ["*"],
    )

    sessions_writer_nice: int = _faces(
        10,
        "CPU priority the session writer process (which keeps agent sessions' turns, "
        "docs/agents.md#sessions) gives up (a nice increment, 0-19): when requests and the "
        "writer want the same core, requests get it and the writer catches up after. 0: "
        "the writer competes as an equal.",
        ge=0,
        le=19,
    )

    @field_validator("anthropic_models")
    @classmethod
    def _model_map(cls, value: str) -> str:
        for pair in filter(None, (p.strip() for p in value.split(","))):
            pattern, sep, model = pair.partition("=")
            if not sep or not pattern.strip() or not model.strip():
                raise ValueError(f"{pair!r} is not pattern=model")
        return value
