"""The pipe to the writer: frames, batches stamped the same way twice, scrubbing in batches."""

from __future__ import annotations

import marshal
import random
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exai.audit.events import event_id_source, format_ts, stamp_records, ts_from_epoch
from exai.audit.scrub import MASK, Scrubber
from exai.audit.wire import FrameError, WriterConfig, encode_frame, frame_length, parse_frame

SECRETS = ["tok-alice-123456", 'pass"word\\x']


def _roundtrip(message: tuple) -> tuple:
    frame = encode_frame(message)
    assert frame_length(frame[:4]) == len(frame) - 4
    return parse_frame(frame[4:])


def test_frames_carry_batches_and_the_config() -> None:
    records = [("call_started", 1.5, {"request_id": "r", "n": 2, "ok": True, "x": None})]
    assert _roundtrip(("batch", 1, 2**127, 0, records)) == ("batch", 1, 2**127, 0, records)
    config = WriterConfig(outbox_path="/o", max_events=5, batch_size=1, ship_interval_s=1.0,
                          retry_interval_s=0.2, send_timeout_s=3.0, backoff_max_s=4.0,
                          instance_id="i", sink={"kind": "none"}, secrets=["s3cr3t"])  # fmt: skip
    assert WriterConfig.from_message(_roundtrip(config.to_message())) == config


@pytest.mark.parametrize("payload", [b"", b"\x00garbage", marshal.dumps("a string"),
                                     marshal.dumps(()), encode_frame((1, 2))[4:]])  # fmt: skip
def test_what_is_not_a_message_is_refused(payload: bytes) -> None:
    with pytest.raises(FrameError):
        parse_frame(payload)


def test_a_frame_announcing_more_than_a_gibibyte_is_refused() -> None:
    with pytest.raises(FrameError):
        frame_length(b"\xff\xff\xff\xff")


def test_a_batch_stamped_twice_gets_the_same_ids_which_are_time_ordered_uuid7() -> None:
    records = [("call_started", 1_800_000_000.25 + i / 1000, {"request_id": str(i)})
               for i in range(1000)]  # fmt: skip
    scrub = Scrubber().scrub_many
    first = stamp_records(records, 42, "inst", scrub)
    assert first == stamp_records(records, 42, "inst", scrub)
    ids = [row[0] for row in first]
    assert len(set(ids)) == 1000
    assert all(uuid.UUID(i).version == 7 for i in ids)
    later = stamp_records(records, random.getrandbits(128), "inst", scrub)
    assert set(ids).isdisjoint(row[0] for row in later)
    # The first 48 bits are the batch's milliseconds, so a later batch sorts after.
    next_batch = event_id_source(7, 1_800_000_001.0)(0)
    assert max(ids) < next_batch


@given(st.floats(min_value=0, max_value=4_000_000_000, allow_nan=False))
def test_ts_from_epoch_is_format_ts_of_the_same_moment(epoch: float) -> None:
    assert ts_from_epoch(epoch) == format_ts(datetime.fromtimestamp(epoch, UTC))


_TEXT = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["sk-abcdefghijklmnopqrst", "Bearer abcdefghijk", "a\x00b", "\udcff",
                     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln", "https://u:pw@host/x",
                     *SECRETS, f"x {SECRETS[0]} y", "desk-1", "plain"]),
)  # fmt: skip
_NAMES = st.sampled_from(["request_id", "tool", "token", "api_key", "prompt_tokens", "note", "a"])
_SCALARS = st.one_of(_TEXT, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
_VALUES = st.one_of(
    _SCALARS, st.lists(_TEXT, max_size=2), st.dictionaries(_NAMES, _TEXT, max_size=2)
)


@given(st.lists(st.dictionaries(_NAMES, _VALUES, max_size=4), max_size=4))
def test_scrubbing_a_batch_gives_what_scrubbing_each_field_does(batch: list[dict]) -> None:
    scrubber = Scrubber(SECRETS)
    expected = [scrubber._scrub_fields(fields) for fields in batch]
    assert scrubber.scrub_many(batch) == expected
    assert [scrubber.scrub(fields) for fields in batch] == expected


def test_a_flat_event_is_copied_and_its_sensitive_strings_masked() -> None:
    scrubber = Scrubber(SECRETS)
    fields = {"request_id": "r1", "token": "abc", "prompt_tokens": 5}
    out = scrubber.scrub_many([fields, {"note": f"see {SECRETS[0]}"}])
    assert out == [
        {"request_id": "r1", "token": MASK, "prompt_tokens": 5},
        {"note": f"see {MASK}"},
    ]
    out[0]["request_id"] = "changed"
    assert fields["request_id"] == "r1"
