"""Records as OTLP protobuf bytes: the body of an OTLP/HTTP ``/v1/traces`` request.

The SDK's encoder builds a protobuf object per span, attribute and value and
serializes the tree: about 15 µs a span here. This writes the wire format
straight from :mod:`exai.tracing.records` tuples, with the encodings that
repeat (an attribute's key with a short string or a number, a span name) kept in a
bounded cache, in a few microseconds a span. It writes what the SDK's encoder
writes for the same span (``opentelemetry-proto``'s ``trace.proto`` and
``common.proto``; ``tests/tracing/test_encoding.py`` parses both and compares
them): the span kind shifted by one, the span ``flags`` saying whether the
parent is remote, a status on every span, links without their trace state.

Every string is passed through ``text`` (the credential scrubber) on its way.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from exai.tracing.records import Record

__all__ = ["Encoder"]

_Q: Final = struct.Struct("<Q").pack
_D: Final = struct.Struct("<d").pack
_I: Final = struct.Struct("<I").pack
_CACHE_MAX: Final = 16384
_SHORT: Final = 256  # string values up to this length are cached with their key
_SCALARS: Final = frozenset({bool, int, float})
_HAS_IS_REMOTE: Final = 0x100
_IS_REMOTE: Final = 0x200
_LOW64: Final = (1 << 64) - 1
_NONE_DROPPED: Final = (0, 0, 0)
# trace_id (field 1, 16 bytes) and span_id (field 2, 8 bytes), big-endian as OTLP has them.
_IDS: Final = struct.Struct(">HQQHQ").pack
_PARENT: Final = struct.Struct(">HQ").pack  # parent_span_id (field 4)
_IDS_PARENT: Final = struct.Struct(">HQQHQHQ").pack  # the three, when no trace state is between
# kind (field 6, a varint under 128), start and end (fields 7 and 8, fixed64).
_KIND_TIMES: Final = struct.Struct("<BBBQBQ").pack
_STATUS: Final = {code: bytes((0x7A, 2, 0x18, code)) if code else b"\x7a\x00" for code in (0, 1, 2)}
# flags (field 16, fixed32): whether the parent is remote is known, and if it is.
_LOCAL_FLAGS: Final = b"\x85\x01" + _I(_HAS_IS_REMOTE)
_REMOTE_FLAGS: Final = b"\x85\x01" + _I(_HAS_IS_REMOTE | _IS_REMOTE)
# A leaf's body but its name and trace state: ids and parent, kind and times, status OK, flags.
_LEAF_FIXED: Final = 38 + 20 + 4 + 6
_LEAF_TAIL: Final = _STATUS[1] + _LOCAL_FLAGS


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (``tag`` is the whole key byte)."""
    n = len(payload)
    if n < 0x80:
        return bytes((tag, n)) + payload
    if n < 0x4000:  # a span's body: its length in two bytes, no call
        return bytes((tag, n & 0x7F | 0x80, n >> 7)) + payload
    return bytes((tag,)) + _varint(n) + payload


class Encoder:
    """Encodes records of one resource and instrumentation scope."""

    def __init__(self, resource: Mapping[str, Any], scope: tuple[str, str],
                 text: Callable[[str], str] | None = None) -> None:  # fmt: skip
        self._text = text or str
        # One cache per field tag: the same pair is a span's, an event's or a link's.
        self._kv: dict[int, dict[tuple[Any, ...], bytes]] = {0x0A: {}, 0x1A: {}, 0x22: {}, 0x4A: {}}
        self._names: dict[str, bytes] = {}
        # A leaf's Span field header and name field, by its name and trace state.
        self._leaves: dict[tuple[str, str], tuple[bytes, bytes, bytes]] = {}
        self._keys: dict[str, bytes] = {}  # an attribute's key as a KeyValue.key field
        self._calls: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # by call shape (call)
        self._resource = _field(0x0A, self.attributes(resource))
        name, version = scope
        self._scope = _field(0x0A, _field(0x0A, name.encode()) + _field(0x12, version.encode()))

    def request(self, spans: Iterable[bytes]) -> bytes:
        """An ``ExportTraceServiceRequest`` of spans :meth:`span` encoded."""
        scope_spans = self._scope + b"".join(spans)
        return _field(0x0A, self._resource + _field(0x12, scope_spans))

    def span(self, r: Record, dropped: tuple[int, int, int] = _NONE_DROPPED) -> bytes:
        """One ``Span``, as a ``ScopeSpans.spans`` field, after a field for each of its
        leaves (what :func:`~exai.tracing.records.expand` would make of them, in its
        order); ``dropped``: the attributes, events and links the span limits took
        from it (:mod:`exai.tracing.limits`)."""
        (name, trace_id, span_id, parent_id, parent_remote, _flags, trace_state, kind, start, end,
         attributes, events, links, status_code, status_message, leaves) = r  # fmt: skip
        high, low = trace_id >> 64, trace_id & _LOW64
        if not (events or links or status_message) and dropped is _NONE_DROPPED:
            # Nearly every span.
            field = self._plain(name, high, low, span_id, parent_id, parent_remote, trace_state,
                                kind, start, end, attributes, status_code)  # fmt: skip
        else:
            ids, encoded = self._head(name, high, low, span_id, parent_id, trace_state)
            field = _field(0x12, b"".join(self._rest(
                ids, encoded, _KIND_TIMES(0x30, kind + 1, 0x39, start, 0x41, end), attributes,
                events, links, status_code, status_message,
                _REMOTE_FLAGS if parent_remote else _LOCAL_FLAGS, dropped)))  # fmt: skip
        if leaves:
            return b"".join([self._leaf(leaf, high, low, span_id, trace_state) for leaf in leaves]
                            + [field])  # fmt: skip
        return field

    def call(self, r: Record) -> bytes:
        """A call record (:data:`exai.tracing.records.CALL`) as its four spans, in the
        order :func:`~exai.tracing.records.expand` makes them: the call's leaf, the
        call's span, the face's leaf, the face's span; the same bytes as :meth:`span`
        writes for the two records :func:`~exai.tracing.records.standard` makes of it.

        Written out, with what the four share taken once (the trace's id and state,
        the call's end) and what a call's spans have in common with the last call's
        of the same names (every field but ids, times and attributes) made once
        (:meth:`_call_shape`): the writer runs it for nearly every call."""
        (_, face_name, trace_id, face_id, face_parent, face_remote, _flags, state, face_kind,
         face_start, face_attributes, adm_name, adm_id, adm_start, adm_end, name, span_id,
         start, end, attributes, aud_name, aud_id, aud_start, aud_end) = r  # fmt: skip
        key = (face_name, adm_name, name, aud_name, state, face_kind, face_remote)
        shape = self._calls.get(key)
        if shape is None:
            shape = self._call_shape(key)
        (aud_head, adm_head, state_field, aud_name_field, adm_name_field, call_name_field,
         face_name_field, face_kind_1, face_tail) = shape  # fmt: skip
        high, low = trace_id >> 64, trace_id & _LOW64
        if state_field:
            call_ids = _IDS(0x0A10, high, low, 0x1208, span_id) + state_field
            face_ids = _IDS(0x0A10, high, low, 0x1208, face_id) + state_field
            aud_ids = (_IDS(0x0A10, high, low, 0x1208, aud_id) + state_field
                       + _PARENT(0x2208, span_id))  # fmt: skip
            adm_ids = (_IDS(0x0A10, high, low, 0x1208, adm_id) + state_field
                       + _PARENT(0x2208, face_id))  # fmt: skip
            call_ids += _PARENT(0x2208, face_id)
            if face_parent:
                face_ids += _PARENT(0x2208, face_parent)
        else:
            aud_ids = _IDS_PARENT(0x0A10, high, low, 0x1208, aud_id, 0x2208, span_id)
            call_ids = _IDS_PARENT(0x0A10, high, low, 0x1208, span_id, 0x2208, face_id)
            adm_ids = _IDS_PARENT(0x0A10, high, low, 0x1208, adm_id, 0x2208, face_id)
            face_ids = (_IDS_PARENT(0x0A10, high, low, 0x1208, face_id, 0x2208, face_parent)
                        if face_parent else _IDS(0x0A10, high, low, 0x1208, face_id))  # fmt: skip
        call_body = b"".join((call_ids, call_name_field,
                              _KIND_TIMES(0x30, 1, 0x39, start, 0x41, end),
                              self.attributes(attributes, 0x4A) if attributes else b"",
                              _LEAF_TAIL))  # fmt: skip
        face_body = b"".join((face_ids, face_name_field,
                              _KIND_TIMES(0x30, face_kind_1, 0x39, face_start, 0x41, end),
                              self.attributes(face_attributes, 0x4A) if face_attributes else b"",
                              face_tail))  # fmt: skip
        n, m = len(call_body), len(face_body)
        return b"".join((
            aud_head, aud_ids, aud_name_field, _KIND_TIMES(0x30, 1, 0x39, aud_start, 0x41, aud_end),
            _LEAF_TAIL,
            bytes((0x12, n & 0x7F | 0x80, n >> 7) if n >= 0x80 else (0x12, n))
            if n < 0x4000 else b"\x12" + _varint(n),
            call_body,
            adm_head, adm_ids, adm_name_field, _KIND_TIMES(0x30, 1, 0x39, adm_start, 0x41, adm_end),
            _LEAF_TAIL,
            bytes((0x12, m & 0x7F | 0x80, m >> 7) if m >= 0x80 else (0x12, m))
            if m < 0x4000 else b"\x12" + _varint(m),
            face_body,
        ))  # fmt: skip

    def _call_shape(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        """What every call record with these names, trace state, face kind and remote
        parent encodes alike (:meth:`call`)."""
        face_name, adm_name, name, aud_name, state, face_kind, face_remote = key
        if len(self._calls) > _CACHE_MAX:
            self._calls.clear()
        aud_head, _, aud_name_field = self._leaf_fixed(aud_name, state)
        adm_head, _, adm_name_field = self._leaf_fixed(adm_name, state)
        shape = self._calls[key] = (
            aud_head, adm_head, _field(0x1A, state.encode()) if state else b"", aud_name_field,
            adm_name_field, self._name(name), self._name(face_name), face_kind + 1,
            _STATUS[1] + (_REMOTE_FLAGS if face_remote else _LOCAL_FLAGS),
        )  # fmt: skip
        return shape

    def _plain(self, name: str, high: int, low: int, span_id: int, parent_id: int,
               parent_remote: bool, trace_state: str, kind: int, start: int, end: int,
               attributes: Mapping[str, Any], status_code: int = 1) -> bytes:  # fmt: skip
        """A span with no events, links, status message, leaves or dropped counts (nearly
        every span), as a ``ScopeSpans.spans`` field."""
        ids, encoded = self._head(name, high, low, span_id, parent_id, trace_state)
        body = b"".join((ids, encoded, _KIND_TIMES(0x30, kind + 1, 0x39, start, 0x41, end),
                         self.attributes(attributes, 0x4A) if attributes else b"",
                         _STATUS[status_code],
                         _REMOTE_FLAGS if parent_remote else _LOCAL_FLAGS))  # fmt: skip
        n = len(body)
        if n < 0x4000:  # _field's, inline: nearly every span is 128 bytes or more
            return bytes((0x12, n & 0x7F | 0x80, n >> 7) if n >= 0x80 else (0x12, n)) + body
        return _field(0x12, body)

    def _head(self, name: str, high: int, low: int, span_id: int, parent_id: int,
              trace_state: str) -> tuple[bytes, bytes]:  # fmt: skip
        """A span's ids (and trace state) and its name, encoded: the fixed fields in one
        pack each (a call's spans differ in little else)."""
        if trace_state:
            ids = _IDS(0x0A10, high, low, 0x1208, span_id) + _field(0x1A, trace_state.encode())
            if parent_id:
                ids += _PARENT(0x2208, parent_id)
        elif parent_id:
            ids = _IDS_PARENT(0x0A10, high, low, 0x1208, span_id, 0x2208, parent_id)
        else:
            ids = _IDS(0x0A10, high, low, 0x1208, span_id)
        return ids, self._name(name)

    def _name(self, name: str) -> bytes:
        """A span's name as its ``Span.name`` field."""
        encoded = self._names.get(name)
        if encoded is None:
            encoded = self._names[name] = _field(0x2A, self._text(name).encode())
            if len(self._names) > _CACHE_MAX:
                self._names.clear()
        return encoded

    def _rest(self, ids: bytes, name: bytes, kind_times: bytes, attributes: Mapping[str, Any],
              events: Any, links: Any, status_code: int, status_message: str | None,
              flags: bytes, dropped: tuple[int, int, int]) -> list[bytes]:  # fmt: skip
        """A span's fields, in order, when it has events, links, a status message or
        something the span limits dropped."""
        parts = [ids, name, kind_times]
        if attributes:
            parts.append(self.attributes(attributes, 0x4A))
        if dropped[0]:
            parts += (b"\x50", _varint(dropped[0]))
        for event_name, ts, event_attributes in events or ():
            body = b"\x09" + _Q(ts) + _field(0x12, self._text(event_name).encode())
            if event_attributes:
                body += self.attributes(event_attributes, 0x1A)
            parts.append(_field(0x5A, body))
        if dropped[1]:
            parts += (b"\x60", _varint(dropped[1]))
        for l_trace, l_span, _l_flags, _l_state, l_remote, l_attributes in links or ():
            body = (
                b"\x0a\x10" + l_trace.to_bytes(16, "big") + b"\x12\x08" + l_span.to_bytes(8, "big")
            )
            if l_attributes:
                body += self.attributes(l_attributes, 0x22)
            body += b"\x35" + _I(_HAS_IS_REMOTE | (_IS_REMOTE if l_remote else 0))
            parts.append(_field(0x6A, body))
        if dropped[2]:
            parts += (b"\x70", _varint(dropped[2]))
        if status_message:
            status = _field(0x12, self._text(status_message).encode())
            if status_code:
                status += bytes((0x18, status_code))
            parts.append(_field(0x7A, status))
        else:
            parts.append(_STATUS[status_code])
        parts.append(flags)
        return parts

    def _leaf(self, leaf: tuple[str, int, int, int], high: int, low: int, parent_id: int,
              trace_state: str) -> bytes:  # fmt: skip
        """A leaf of a span as the span :func:`~exai.tracing.records.expand` makes of it:
        internal, status ``OK``, no attributes; all but its ids and times cached."""
        name, span_id, start, end = leaf
        head, state, name_field = self._leaf_fixed(name, trace_state)
        if state:
            ids = (_IDS(0x0A10, high, low, 0x1208, span_id) + state
                   + _PARENT(0x2208, parent_id))  # fmt: skip
        else:
            ids = _IDS_PARENT(0x0A10, high, low, 0x1208, span_id, 0x2208, parent_id)
        return b"".join((head, ids, name_field, _KIND_TIMES(0x30, 1, 0x39, start, 0x41, end),
                         _LEAF_TAIL))  # fmt: skip

    def _leaf_fixed(self, name: str, trace_state: str) -> tuple[bytes, bytes, bytes]:
        """A leaf's ``Span`` field header, trace state field and name field, by its name
        and trace state."""
        fixed = self._leaves.get((name, trace_state))
        if fixed is None:
            if len(self._leaves) > _CACHE_MAX:
                self._leaves.clear()
            state = _field(0x1A, trace_state.encode()) if trace_state else b""
            name_field = _field(0x2A, self._text(name).encode())
            size = _LEAF_FIXED + len(state) + len(name_field)
            fixed = self._leaves[(name, trace_state)] = (b"\x12" + _varint(size), state,
                                                         name_field)  # fmt: skip
        return fixed

    def attributes(self, attributes: Mapping[str, Any], tag: int = 0x0A) -> bytes:
        """Repeated ``KeyValue`` fields, each under ``tag``."""
        cache = self._kv[tag]
        out = []
        for key, value in attributes.items():
            if type(value) is str and len(value) <= _SHORT:
                encoded = cache.get((key, value))
                if encoded is None:
                    encoded = self._new_text_pair(key, value, tag, cache)
                out.append(encoded)
            elif type(value) in _SCALARS:
                # bool, int and float by type too: True, 1 and 1.0 are equal keys.
                encoded = cache.get((key, type(value), value))
                if encoded is None:
                    if len(cache) > _CACHE_MAX:
                        cache.clear()
                    encoded = cache[(key, type(value), value)] = self._kv_field(key, value, tag)
                out.append(encoded)
            else:
                out.append(self._kv_field(key, value, tag))
        return b"".join(out)

    def _new_text_pair(self, key: str, value: str, tag: int,
                       cache: dict[tuple[Any, ...], bytes]) -> bytes:  # fmt: skip
        """A ``KeyValue`` field with a short string value not in ``cache`` (a request's
        id, once a call), encoded and cached: in fewest steps when every length in
        it fits one byte, as nearly all do."""
        if len(cache) > _CACHE_MAX:
            cache.clear()
        data = self._text(value).encode()
        key_field = self._keys.get(key)
        n = len(data)
        if key_field is None or n > 100 or len(key_field) > 20:
            encoded = cache[(key, value)] = self._kv_field(key, value, tag)
            return encoded
        # KeyValue {key, value: AnyValue {string_value}}: every length under 128.
        encoded = cache[(key, value)] = (bytes((tag, len(key_field) + n + 4)) + key_field
                                         + bytes((0x12, n + 2, 0x0A, n)) + data)  # fmt: skip
        return encoded

    def _kv_field(self, key: str, value: Any, tag: int) -> bytes:
        encoded_key = self._keys.get(key)
        if encoded_key is None:
            if len(self._keys) > _CACHE_MAX:
                self._keys.clear()
            encoded_key = self._keys[key] = _field(0x0A, key.encode())
        return _field(tag, encoded_key + _field(0x12, self._any(value)))

    def _any(self, value: Any) -> bytes:
        """An ``AnyValue``'s body."""
        if isinstance(value, str):
            return _field(0x0A, self._text(value).encode())
        if isinstance(value, bool):
            return b"\x10\x01" if value else b"\x10\x00"
        if isinstance(value, int):
            return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
        if isinstance(value, float):
            return b"\x21" + _D(value)
        if isinstance(value, tuple | list):
            return _field(0x2A, b"".join(_field(0x0A, self._any(v)) for v in value))
        return b""
