"""The settings checks `exai serve` and `exai config` share, beyond each value's type."""

from __future__ import annotations

import pytest

from exai.cli.preflight import check_settings, unknown_models
from exai.providers.catalogue import load_catalogue
from exai.settings import Settings, SettingsError


def _settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_known_names_aliases_and_auto_pass():
    assert check_settings(_settings(default_model="auto", fallback_models=["glm", "kimi-k2.6"],
                                    routing_rules='[{"when": {"sensitive": true}, '
                                                  '"model": "glm-4.5-flash"}]')) == []  # fmt: skip


def test_every_problem_is_one_line_naming_its_setting():
    with pytest.raises(SettingsError) as info:
        check_settings(_settings(default_model="nope", fallback_models=["auto"],
                                 routing_rules='[{"model": "missing-model"}]'))  # fmt: skip
    assert [p.split(":")[0] for p in info.value.problems] == [
        "EXAI_DEFAULT_MODEL", "EXAI_FALLBACK_MODELS", "EXAI_ROUTING_RULES"]  # fmt: skip
    assert all("\n" not in p for p in info.value.problems)


def test_a_model_an_openai_compatible_server_may_report_is_left_to_start_up():
    """Without EXAI_OPENAI_COMPAT_MODELS, the server's own list decides, once asked."""
    settings = _settings(openai_compat_base_url="http://127.0.0.1:9/v1", default_model="llama3")
    assert check_settings(settings) == [("EXAI_DEFAULT_MODEL", "llama3")]
    catalogue = load_catalogue()
    assert unknown_models(catalogue, [("EXAI_DEFAULT_MODEL", "llama3")]) == [
        "EXAI_DEFAULT_MODEL: unknown model 'llama3'; expected one of "
        + ", ".join(catalogue.names())
        + ' or "auto"'
    ]
    catalogue.add_discovered("openai_compat", ["llama3"])
    assert unknown_models(catalogue, [("EXAI_DEFAULT_MODEL", "llama3")]) == []
    listed = _settings(openai_compat_base_url="http://127.0.0.1:9/v1",
                       openai_compat_models=["llama3"], default_model="llama3")  # fmt: skip
    assert check_settings(listed) == []
    with pytest.raises(SettingsError, match="retired by Moonshot"):
        check_settings(_settings(openai_compat_base_url="http://127.0.0.1:9/v1",
                                 default_model="kimi-k2-0905-preview"))  # fmt: skip
