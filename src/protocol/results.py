"""What a result tells its caller beside its text, and the model events of a stream.

Every ``call_tool_res`` has :class:`~exai.protocol.frames.ResultMetadata`: the
fields every result has (tool, model, usage, cost...), and the keys each tool
adds. The keys a face reads are declared here, one model per kind of result,
so the tool that writes them and the face that reads them are checked against
one definition (by mypy, and at run time: an unknown field is refused):

- :class:`ModelAnswer`: a model's answer (``chat``, ``completion``): why it
  stopped, its reasoning, the caller's tools it called, what exai adapted...;
- :class:`JobAnswer` and :class:`MemoryAnswer`: what ``schedule`` and the memory
  tools did.

A tool writes ``ModelAnswer(...).fields()`` into its metadata; a face reads
``ModelAnswer.of(result.metadata)``. On the wire they are keys of ``metadata``
as any tool's are, present only when set, so a client that reads them by name
sees the same JSON.

:class:`StreamEvent` is one piece of a streamed model answer (text, reasoning,
a tool call and its arguments), as a tool hands it to a face that asked for
events (:meth:`exai.port.Caller.call`'s ``on_event``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

# pydantic validates a TypedDict only from typing_extensions before Python 3.12 (a
# dependency of pydantic's own).
from typing_extensions import TypedDict

from exai.protocol.frames import ResultMetadata

__all__ = [
    "FunctionCall",
    "JobAnswer",
    "MemoryAnswer",
    "ModelAnswer",
    "ResultFields",
    "ResultNote",
    "StreamEvent",
    "ToolCall",
]


class FunctionCall(TypedDict):
    name: str
    arguments: str  # a JSON object as text, as the model wrote it (streamed: empty at first)


class ToolCall(TypedDict):
    """A call of one of the caller's tools, in OpenAI's shape."""

    id: str
    type: str  # "function"
    function: FunctionCall


class ResultNote(TypedDict):
    """Something exai adapted or left out to serve a request, named by the field."""

    param: str
    message: str


class ResultFields(BaseModel):
    """The declared keys of a result's metadata: these, which any result may carry,
    and each kind of result's own (the subclasses). A key at its default is absent
    from the metadata."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # The result was too long for one response and is stored whole as this artifact of
    # the thread (exai.tools.artifacts); the text is its beginning and a note.
    artifact_id: str | None = None
    trace_id: str | None = None  # the trace of the call, when the daemon traces

    # The declared keys, looked up on every read (pydantic's ``model_fields`` is a
    # property that costs more than the lookups).
    _keys: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._keys = tuple(cls.model_fields)

    @classmethod
    def of(cls, metadata: ResultMetadata) -> Self:
        """The declared keys ``metadata`` carries (the others at their defaults); keys
        that are not declared here are left to whoever knows them."""
        extra = metadata.model_extra
        if not extra:
            return cls()
        keys = cls._keys or tuple(cls.model_fields)
        return cls.model_validate({k: extra[k] for k in keys if k in extra})

    def fields(self) -> dict[str, Any]:
        """The keys to put into a result's metadata, in declaration order."""
        return self.model_dump(exclude_defaults=True)


class ModelAnswer(ResultFields):
    """What a model's answer (``chat``, ``completion``) tells beside its text."""

    # The vendor's: "stop", "length", "tool_calls", "content_filter"...; ``completion``
    # always says it.
    finish_reason: str | None = None
    # The caller's tools the model called; the caller runs them and sends the results.
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # What exai adapted or left out to serve the request.
    notes: list[ResultNote] = Field(default_factory=list)
    memory_ids: list[str] = Field(default_factory=list)  # the memories injected into the prompt
    fallback_from: str | None = None  # the model first chosen, when a fallback answered
    reasoning: str | None = None  # what a thinking model reasoned
    turns_dropped: int | None = None  # earlier turns of the thread left out to fit


class JobAnswer(ResultFields):
    """What ``schedule`` and the job tools did: the job, as ``jobs`` lists it."""

    job: dict[str, Any] | None = None
    jobs: dict[str, Any] | None = None  # ``jobs``: the list, or the job it showed or changed


class MemoryAnswer(ResultFields):
    """What ``remember``, ``forget`` and ``recall`` did."""

    # ``remember``: ``id`` and ``action`` ("insert", "update", "duplicate"); ``forget``: ``id``.
    memory: dict[str, Any] | None = None
    memories: list[dict[str, Any]] | None = None  # ``recall``: the memories found, best first


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One piece of a streamed model answer.

    - ``text``, ``reasoning``: ``text`` holds the next piece.
    - ``tool_call``: the model started calling one of the caller's tools: ``index``
      (0, 1... within the answer) and ``tool_call`` with its ``id``, ``type`` and
      ``function.name`` (``function.arguments`` empty); its arguments follow.
    - ``tool_arguments``: the next piece of the arguments of the call at ``index``,
      in ``text``.
    """

    kind: Literal["text", "reasoning", "tool_call", "tool_arguments"]
    text: str = ""
    index: int | None = None
    tool_call: ToolCall | None = None
