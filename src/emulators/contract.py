"""The provider emulator as a contract: every vendor rule it enforces, with its source.

A TEST FIXTURE's specification, kept as data so that a documentation table
(docs/vendors.md) can be generated from :data:`RULES`. Each :class:`Rule` names
the vendor, the rule in words, the source it was read from (the vendor's page,
its own client, or "3p" for a third party quoting it), where the emulator
enforces it, and what a request breaking it gets back. The ids are cited in the
emulator's modules (``[K-5]``) and in ``tests/emulators``, one test or more per
rule. Sources were read in 2026-11 (/work/shared/VENDORS.md, sections 1 and 2).

"Strict reading" marks a rule where the vendor may be lenient (ignoring a field
rather than refusing it): the emulator refuses, so that exai is caught sending
something that does nothing or may stop working.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["RULES", "Rule", "rows", "rule"]


@dataclass(frozen=True)
class Rule:
    id: str
    vendor: Literal["kimi", "glm", "both"]
    rule: str
    source: str
    enforced: str  # module and function of src/emulators
    answer: str  # what a request breaking it gets (or what the reply does)


_THINKING_GUIDE = "platform.kimi.ai/docs/guide/use-kimi-k2-thinking-model"
_API_CODE = "docs.z.ai/api-reference/api-code"

RULES: list[Rule] = [
    Rule("K-1", "kimi",
         "Model catalogue: kimi-k3 always reasons, takes top-level reasoning_effort "
         "low/high/max only (default max) and no `thinking` field; kimi-k2.7-code(-highspeed) "
         "always think, refuse thinking {type: disabled} (enabled accepted) and take no "
         "reasoning_effort; kimi-k2.6 thinks unless disabled and takes no reasoning_effort. "
         "Strict reading: Moonshot is reported to ignore unknown effort values.",
         f"{_THINKING_GUIDE}; platform.kimi.ai/docs/guide/use-reasoning-effort and K3 "
         "quickstart via 3p docs.agno.com and 3p synaps-engine catalog/kimi.rs",
         "models.CATALOGUE, vendor_rules._kimi_refusal",
         "400 invalid_request_error, emulator's own wording (\"thinking is not supported by "
         "model kimi-k3; use reasoning_effort\", \"thinking cannot be disabled for model X\", "
         "\"reasoning_effort is not supported by model X ...\", \"invalid reasoning_effort ...\")"),
    Rule("K-2", "kimi",
         "Retired ids are not found: kimi-latest, kimi-k2-*-preview, kimi-k2-turbo-preview, "
         "kimi-k2-thinking(-turbo), kimi-k2.5, moonshot-v1-8k/32k/128k/auto and the "
         "moonshot-v1-*-vision-preview ids.",
         "3p promptfoo.dev/docs/providers/moonshot; 3p kimi-api skill digest of "
         "platform.moonshot.cn docs (2026-09-03, 已下线)",
         "vendor_rules.RETIRED_KIMI_MODELS",
         "404 resource_not_found_error \"Not found the model X or Permission denied\""),
    Rule("K-3", "kimi",
         "Fixed sampling: temperature 1 (k3, k2.7-code) or 1.0 thinking / 0.6 not (k2.6); "
         "top_p 0.95; another value sent is refused (\"设置其他值会报错\").",
         "platform.kimi.ai/docs/api/models-overview; " + _THINKING_GUIDE,
         "models.EmulatedModel.temperature, models.EmulatedModel.top_p, vendor_rules._kimi_refusal",
         "400 invalid_request_error \"Invalid request: invalid temperature: only 1 is allowed "
         "for this model\" (top_p alike); wording as users report it"),
    Rule("K-4", "kimi",
         "While thinking, tool_choice may only be auto or none, except on kimi-k3, which takes "
         "required or a named function while it reasons.",
         "3p kimi-api skill quoting the K2.6 quickstart; K3 quickstart via 3p",
         "vendor_rules._kimi_refusal",
         "400 invalid_request_error \"tool_choice 'required' is incompatible with thinking "
         "enabled\" ('specified' for a named function)"),
    Rule("K-5", "kimi",
         "max_tokens is deprecated for max_completion_tokens; the reply is cut at "
         "max_completion_tokens. Strict reading: Moonshot may still honour max_tokens.",
         "test-platform.kimi.ai/docs/api/chat (max_tokens \"Deprecated, please refer to "
         "max_completion_tokens\"); kimi-cli kosong _normalize_generation_kwargs",
         "vendor_rules._kimi_refusal, replies.compose_reply",
         "400 invalid_request_error \"max_tokens is deprecated, please use "
         "max_completion_tokens\" (emulator's wording)"),
    Rule("K-6", "kimi",
         "A function tool whose parameter schema has a property (under properties, items, "
         "additionalProperties, anyOf/oneOf/allOf members, recursively) without `type` is "
         "refused; nodes using anyOf/oneOf/allOf/$ref are exempt.",
         "kimi-cli packages/kosong/src/kosong/chat_provider/kimi.py _convert_tool and "
         "kosong/utils/jsonschema.py ensure_property_types (995a180e)",
         "tool_schemas.untyped_property",
         "400 invalid_request_error \"At path 'properties.X': type is not defined\" (deeper "
         "paths by inference)"),
    Rule("K-7", "kimi",
         "$web_search (builtin_function) needs thinking disabled: refused on kimi-k2.6 "
         "unless thinking is disabled, always on kimi-k3 and kimi-k2.7-code.",
         "platform.moonshot.cn/docs/guide/use-web-search (\"当使用 $web_search 函数时,"
         "必须禁用模型的思考能力\")",
         "vendor_rules._kimi_refusal",
         "400 invalid_request_error, emulator's own wording \"$web_search is not supported "
         "while thinking is enabled; ...\""),
    Rule("K-8", "kimi",
         "A thinking request whose earlier assistant tool-call message lacks a non-empty "
         "reasoning_content is refused.",
         "kimi.com/code error reference; raw body in 3p anomalyco/opencode#25758",
         "vendor_rules._thinking_messages",
         "400 invalid_request_error \"thinking is enabled but reasoning_content is missing in "
         "assistant tool call message at index N\""),
    Rule("K-9", "kimi",
         "Preserved Thinking (kimi-k2.7-code): every earlier assistant message must carry the "
         "reasoning_content key; an empty string is accepted (kimi-cli backfills \"\").",
         f"{_THINKING_GUIDE} (K2.7: keep the reasoning_content of every historical assistant "
         "message); kimi-cli kosong kimi.py stream conversion comment",
         "models.EmulatedModel.preserved_thinking, vendor_rules._thinking_messages",
         "400 invalid_request_error \"thinking is enabled but reasoning_content is missing in "
         "assistant message at index N\" (wording inferred from K-8)"),
    Rule("K-10", "kimi",
         "Partial mode: a trailing assistant message with partial: true on a thinking request "
         "must carry reasoning_content; the continuation carries no new reasoning.",
         "3p kimi-api skill quoting Moonshot's partial-mode page",
         "vendor_rules._thinking_messages, replies.compose_reply",
         "400 invalid_request_error \"thinking is enabled but reasoning_content is missing in "
         "partial assistant message at index N\" (wording inferred)"),
    Rule("K-11", "kimi",
         "Cached tokens are reported only for a prefix of an earlier prompt longer than 256 "
         "tokens (emulator token units); top-level usage.cached_tokens and "
         "prompt_tokens_details.",
         "3p kimi-api skill quoting platform.moonshot.cn context caching; kimi-cli usage",
         "prompt_cache.PromptCache.observe(longer_than=256)",
         "usage.cached_tokens = 0 unless the shared prefix belongs to a prompt of >256 tokens"),
    Rule("K-12", "kimi",
         "At most 5 stop sequences of at most 32 bytes each.",
         "platform.kimi.com/docs/api/chat (via 3p)",
         "vendor_rules.refusal",
         "400 invalid_request_error \"stop: at most 5 strings of at most 32 bytes each\""),
    Rule("G-1", "glm",
         "reasoning_effort is taken by glm-5.2 and above only, with none, minimal, low, "
         "medium, high, xhigh, max; \"none\" means no reasoning on glm-5.2. Strict reading: "
         "Z.ai says it has no effect below 5.2; the emulator refuses it there.",
         "installed zai-sdk 0.2.3 zai/api_resource/chat/completions.py docstring (\"Effective "
         "for glm-5.2 and above models\")",
         "models.CATALOGUE, vendor_rules._glm_refusal",
         "400 code 1210, emulator's own message"),
    Rule("G-2", "glm",
         "glm-5.3 cannot turn thinking off: thinking {type: disabled} or reasoning_effort none "
         "is refused. glm-4.7 and 5.x think by default, 4.6 and earlier only when asked.",
         "3p openrouter.ai/~z-ai/glm-latest, Together GLM-5.3 quickstart; docs.bigmodel.cn "
         "thinking-mode",
         "models.CATALOGUE, vendor_rules._glm_refusal",
         "400 code 1210, emulator's own message"),
    Rule("G-3", "glm", "tool_choice takes \"auto\" only.",
         "docs.z.ai/api-reference/llm/chat-completion", "vendor_rules._glm_refusal",
         "400 code 1210 \"tool_choice only supports auto, not X\" (emulator's wording)"),
    Rule("G-4", "glm", "stop takes one stop word only.",
         "docs.z.ai/api-reference/llm/chat-completion", "vendor_rules._glm_refusal",
         "400 code 1210 \"stop supports only one stop word\" (emulator's wording)"),
    Rule("G-5", "glm",
         "Abnormal ends are finish reasons, whole and streamed: sensitive (content cut to "
         "empty), network_error (part of the text); a prompt over the context is a 200 with "
         "empty content and finish_reason model_context_window_exceeded (not HTTP 400 1261, "
         "which is not in Z.ai's table).",
         f"{_API_CODE} (\"the reason for the exception will be provided in the "
         "finish_reason\"); 3p anomalyco/opencode#18813",
         "replies.compose_reply, replies.overflow_reply, provider.build_app",
         "200, finish_reason sensitive / network_error / model_context_window_exceeded"),
    Rule("G-6", "glm",
         "With tool_stream, the first argument fragment comes with the call's id and name, "
         "continuation deltas repeat the id, and the last fragment is on the finish chunk.",
         "docs.z.ai/guides/tools/stream-tool; 3p braintrustdata/lingua#318",
         "vendor_wire.stream_chunks", "SSE chunk shape"),
    Rule("G-7", "glm",
         "Optionally (config glm_tool_stream_repeat_name) every tool_stream piece repeats "
         "function.name, as some GLM servers do.",
         "3p vllm#44098", "vendor_wire.stream_chunks", "SSE chunk shape"),
    Rule("G-8", "glm", "Error 1305 reads \"The API has triggered a rate limit.\"",
         _API_CODE, "vendor_wire._ERRORS", "429 code 1305"),
    Rule("G-9", "glm",
         "embedding-3 dimensions are 256, 512, 1024 or 2048 (default 2048); the "
         "OpenAI-compatible /v1/embeddings takes 1..4096 (default 256 here).",
         "3p zai-rs, rubydoc smart_prompt (VENDORS.md row 46)", "embeddings.embeddings_body",
         "400 code 1210 \"dimensions must be one of 256, 512, 1024, 2048\" (emulator's "
         "wording)"),
    Rule("B-1", "both",
         "A tool message whose tool_call_id answers no earlier assistant tool call is refused.",
         "OpenAI's API (Moonshot's and Z.ai's wording not found)", "vendor_rules.refusal",
         "400 invalid_request_error / code 1210 \"messages[i]: a message with role 'tool' "
         "must answer a preceding assistant tool call; ...\""),
]  # fmt: skip


def rule(rule_id: str) -> Rule:
    """The rule with this id (KeyError if none)."""
    for item in RULES:
        if item.id == rule_id:
            return item
    raise KeyError(rule_id)


def rows() -> list[dict[str, Any]]:
    """The rules as plain dicts, in order: what a docs table is generated from."""
    return [asdict(r) for r in RULES]
