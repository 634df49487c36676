"""The vendor SDKs' parts exai relies on beyond their documented surface: a test that
fails loudly, naming the seam, when an upgrade moves one (pyproject.toml pins them)."""

from __future__ import annotations

import inspect

from zai.api_resource.chat.completions import Completions


def test_zai_sdk_still_has_the_exceptions_the_glm_plugin_catches():
    from zai.core import _errors

    for name in ("APIConnectionError", "APIResponseError", "APIStatusError", "APITimeoutError"):
        assert issubclass(getattr(_errors, name), Exception), f"zai.core._errors.{name} is gone"


def test_zai_sdk_takes_reasoning_effort():
    # GLM-5.2 and later take reasoning_effort; the plugin passes it to the SDK by name.
    assert "reasoning_effort" in inspect.signature(Completions.create).parameters
