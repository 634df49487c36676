"""``consensus`` through a real daemon, real SDKs and the provider emulator."""

from __future__ import annotations

import uuid

import pytest

from exai.protocol import ErrorCode
from exai.tools.consensus import SYNTHESIS_PROMPT
from tests.conftest import emulated_providers, make_settings, running_daemon

KIMI, TURBO, GLM = "kimi-k2.6", "kimi-k2.7-code", "glm-5.1"
THREE = [{"model": KIMI, "stance": "for"}, {"model": GLM, "stance": "against"},
         {"model": TURBO, "stance": "neutral"}]  # fmt: skip


@pytest.fixture
def settings(tmp_path, emulator):
    def build(**overrides):
        return make_settings(tmp_path, **{**emulated_providers(emulator), **overrides})

    return build


def _system(request: dict) -> str:
    return request["body"]["messages"][0]["content"]


def _split(requests: list[dict]) -> tuple[list[dict], list[dict]]:
    synthesis = [r for r in requests if _system(r) == SYNTHESIS_PROMPT]
    return [r for r in requests if _system(r) != SYNTHESIS_PROMPT], synthesis


async def test_models_are_asked_at_once_then_synthesized(settings, emulator, client_factory):
    emulator.configure(latency_ms=300)
    progress: list[str] = []
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("consensus", {"prompt": "Adopt SQLite WAL?", "models": THREE},
                                on_progress=lambda p: progress.append(p.message))  # fmt: skip
        assert res.error is None, res.error
        stored = await daemon.services.store.messages(res.metadata.continuation_id, "anonymous")

    asked, synthesis = _split(emulator.requests)
    assert len(asked) == 3 and len(synthesis) == 1
    # Every model request arrived before any was answered: they ran side by side,
    # so the call took about one model latency, not three.
    assert max(r["received_at"] for r in asked) < min(r["answered_at"] for r in asked)
    assert synthesis[0]["received_at"] >= max(r["answered_at"] for r in asked)
    stances = sorted(_system(r).rsplit("\n\n", 1)[1].split(":")[0] for r in asked)
    assert stances == ["Argue against it", "Argue for it", "Weigh it impartially"]

    text = res.outputs[0].text
    for label in (f"{KIMI} (for)", f"{GLM} (against)", f"{TURBO} (neutral)"):
        assert f"## {label}\n" in text
    assert f"## Synthesis by {KIMI}\n" in text
    assert res.metadata.model == KIMI and res.metadata.synthesis["model"] == KIMI
    assert [o["ok"] for o in res.metadata.opinions] == [True, True, True]
    assert sum(m.endswith("answered") for m in progress) == 3 and "synthesizing" in progress[-1]
    # The whole exchange is one stored turn: every answer, then the synthesis.
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[0].content.count("emulated reply #1 to: Adopt SQLite WAL?") == 3
    assert all(r["body"]["model"] in stored[0].content for r in asked)
    assert stored[1].content in text


@pytest.mark.parametrize("failure", ["503", "unconfigured"])
async def test_a_failed_model_leaves_the_others_answers(settings, tmp_path, emulator,
                                                        client_factory, failure):  # fmt: skip
    if failure == "503":
        emulator.script({"status": 503}, vendor="glm")
        config = settings()
    else:
        config = make_settings(tmp_path, kimi_api_key="sk-x", kimi_base_url=emulator.base_url_kimi)
    async with running_daemon(config) as daemon:
        client = await client_factory(daemon)
        res = await client.call("consensus", {"prompt": "Ship it?", "models": THREE})
    assert res.error is None, res.error
    by_model = {o["model"]: o for o in res.metadata.opinions}
    assert by_model[GLM]["ok"] is False
    assert by_model[GLM]["error"]["code"] == ErrorCode.PROVIDER_ERROR.value
    assert by_model[KIMI]["ok"] and by_model[TURBO]["ok"]
    text = res.outputs[0].text
    assert f"## {GLM} (against)\n(no answer: PROVIDER_ERROR" in text
    assert text.count("emulated reply") >= 3  # two answers and the synthesis
    assert res.metadata.continuation_id is not None


async def test_a_model_past_its_own_deadline_is_reported_as_timeout(settings, emulator,
                                                                   client_factory):  # fmt: skip
    emulator.script({"latency_ms": 3000}, vendor="glm")
    models = [{"model": KIMI, "stance": "for"},
              {"model": GLM, "stance": "against", "timeout_s": 0.3}]  # fmt: skip
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("consensus", {"prompt": "Ship it?", "models": models})
    assert res.error is None, res.error
    glm = next(o for o in res.metadata.opinions if o["model"] == GLM)
    assert glm["error"]["code"] == ErrorCode.TIMEOUT.value and "0.3s" in glm["error"]["message"]
    assert res.metadata.synthesis["model"] == KIMI


async def test_a_failed_synthesis_still_returns_the_answers(settings, emulator, client_factory):
    emulator.script({"status": 503}, vendor="glm")
    models = [{"model": KIMI, "stance": "for"}, {"model": TURBO, "stance": "against"}]
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("consensus", {"prompt": "Ship it?", "models": models,
                                              "synthesis_model": GLM})  # fmt: skip
        assert await daemon.services.store.list_threads() == []  # only whole exchanges
    assert res.error is None, res.error
    assert res.metadata.synthesis["error"]["code"] == ErrorCode.PROVIDER_ERROR.value
    assert "## Synthesis failed: PROVIDER_ERROR" in res.outputs[0].text
    assert res.outputs[0].text.count("emulated reply") == 2


async def test_no_answer_at_all_is_a_provider_error(settings, emulator, client_factory):
    emulator.script({"status": 503}, {"status": 503})
    models = [{"model": KIMI, "stance": "for"}, {"model": KIMI, "stance": "against"}]
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("consensus", {"prompt": "Ship it?", "models": models})
        assert await daemon.services.store.list_threads() == []
    assert res.error.code == ErrorCode.PROVIDER_ERROR and res.error.retryable
    assert "no model answered" in res.error.message and len(res.error.details["opinions"]) == 2


async def test_the_exchange_continues_a_conversation(settings, emulator, client_factory):
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        first = await client.call("chat", {"prompt": "we use Postgres", "model": KIMI})
        cid = first.metadata.continuation_id
        res = await client.call("consensus", {"prompt": "Add Redis?", "continuation_id": cid,
                                              "models": THREE[:2]})  # fmt: skip
        assert res.error is None and res.metadata.continuation_id == cid
        after = await client.call("chat", {"prompt": "so?", "continuation_id": cid})
    asked, _ = _split(emulator.requests[1:3])
    for request in asked:  # each model saw the earlier turn
        roles = [m["role"] for m in request["body"]["messages"]]
        assert roles == ["system", "user", "assistant", "user"]
    last = [m["content"] for m in emulator.requests[-1]["body"]["messages"]]
    assert "Add Redis?" in last[3] and last[4] in res.outputs[0].text and last[5] == "so?"
    assert after.error is None


@pytest.mark.parametrize(
    ("models", "extra", "code", "named"),
    [
        ([{"model": GLM, "stance": "for"}, {"model": "glm-5.1-latest", "stance": "for"}], {},
         ErrorCode.VALIDATION_ERROR,
         "duplicate stance: glm-5.1-latest is asked for stance 'for' twice"),
        ([{"model": KIMI}, {"model": KIMI}], {}, ErrorCode.VALIDATION_ERROR, "'neutral' twice"),
        ([{"model": KIMI}, {"model": "gpt-17"}], {}, ErrorCode.VALIDATION_ERROR, "gpt-17"),
        ([{"model": KIMI}], {}, ErrorCode.VALIDATION_ERROR, "models"),
        (THREE, {"continuation_id": str(uuid.uuid4())}, ErrorCode.CONVERSATION_NOT_FOUND, ""),
        (THREE, {"files": ["/etc/passwd"]}, ErrorCode.FORBIDDEN, ""),
        (THREE, {"synthesis_model": "nope"}, ErrorCode.VALIDATION_ERROR, "nope"),
    ],
)  # fmt: skip
async def test_bad_input_is_refused_before_any_model_call(settings, emulator, client_factory,
                                                          models, extra, code, named):  # fmt: skip
    async with running_daemon(settings()) as daemon:
        client = await client_factory(daemon)
        res = await client.call("consensus", {"prompt": "x", "models": models, **extra})
    assert res.error is not None and res.error.code == code, res.error
    assert named in res.error.message
    assert emulator.requests == []


async def test_the_provider_call_limit_counts_the_synthesis(settings, emulator, client_factory):
    async with running_daemon(settings(max_provider_calls_per_request=3)) as daemon:
        client = await client_factory(daemon)
        res = await client.call("consensus", {"prompt": "x", "models": THREE})
        assert res.error.code == ErrorCode.VALIDATION_ERROR
        assert "4 calls" in res.error.message and "EXAI_MAX_PROVIDER_CALLS" in res.error.message
        ok = await client.call("consensus", {"prompt": "x", "models": THREE[:2]})
        assert ok.error is None
    assert len(emulator.requests) == 3
