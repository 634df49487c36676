"""Settings: environment names, validation messages, masking."""

from __future__ import annotations

import pytest

from exai.settings import SettingsError, load_settings


def test_defaults(monkeypatch):
    for name in ("EXAI_WS_HOST", "EXAI_WS_PORT", "EXAI_LOG_FORMAT"):
        monkeypatch.delenv(name, raising=False)
    s = load_settings(_env_file=None)
    assert (s.ws_host, s.ws_port, s.log_format) == ("127.0.0.1", 8079, "console")


def test_invalid_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("EXAI_WS_PORT", "not-a-port")
    with pytest.raises(SettingsError) as info:
        load_settings(_env_file=None)
    assert "EXAI_WS_PORT" in str(info.value)


def test_invalid_choice_names_the_variable(monkeypatch):
    monkeypatch.setenv("EXAI_LOG_FORMAT", "xml")
    with pytest.raises(SettingsError, match="EXAI_LOG_FORMAT"):
        load_settings(_env_file=None)


def test_vendor_names_and_aliases(monkeypatch):
    monkeypatch.setenv("MOONSHOT_API_KEY", "sk-moon")
    monkeypatch.setenv("ZHIPUAI_API_KEY", "zp-key")
    s = load_settings(_env_file=None)
    assert s.kimi_api_key.get_secret_value() == "sk-moon"
    assert s.glm_api_key.get_secret_value() == "zp-key"


def test_dotenv_file_is_read(tmp_path, monkeypatch):
    monkeypatch.delenv("EXAI_WS_PORT", raising=False)
    env = tmp_path / ".env"
    env.write_text("EXAI_WS_PORT=9123\nEXAI_TOOLS_DENY=echo, status\n")
    s = load_settings(_env_file=str(env))
    assert s.ws_port == 9123 and s.tools_deny == ["echo", "status"]


def test_masked_hides_secrets(monkeypatch):
    monkeypatch.setenv("EXAI_WS_TOKEN", "super-secret-token")
    monkeypatch.setenv("EXAI_STORE_URL", "postgresql://u:pw123@db:5432/x")
    masked = load_settings(_env_file=None).masked()
    text = repr(masked)
    assert "super-secret-token" not in text and "pw123" not in text
    assert masked["EXAI_WS_TOKEN"] == "****"
    assert masked["EXAI_WS_PORT"] == 8079


def test_masked_hides_the_credentials_of_every_url_setting(monkeypatch):
    urls = {
        "EXAI_STORE_URL": "postgresql://u:pw-store@db:5432/x",
        "SUPABASE_URL": "https://u:pw-supabase@project.supabase.co",
        "KIMI_BASE_URL": "https://u:pw-kimi@api.moonshot.ai/v1",
        "GLM_BASE_URL": "https://u:pw-glm@api.z.ai/api/paas/v4",
        "EXAI_OPENAI_COMPAT_BASE_URL": "http://u:pw-compat@127.0.0.1:11434/v1?api_key=pw-query",
    }
    for name, url in urls.items():
        monkeypatch.setenv(name, url)
    masked = load_settings(_env_file=None).masked()
    assert "pw-" not in repr(masked)
    assert masked["EXAI_OPENAI_COMPAT_BASE_URL"] == (
        "http://u:****@127.0.0.1:11434/v1?api_key=****"
    )


def test_relative_allowed_root_rejected(monkeypatch):
    monkeypatch.setenv("EXAI_ALLOWED_ROOTS", "relative/dir")
    with pytest.raises(SettingsError, match="EXAI_ALLOWED_ROOTS"):
        load_settings(_env_file=None)


def test_env_example_is_generated_from_the_settings():
    """.env.example documents every setting; regenerate it with `exai config --example`."""
    from pathlib import Path

    from exai.settings import Settings, env_example, env_name

    text = (Path(__file__).parent.parent / ".env.example").read_text()
    assert text == env_example()
    for name in Settings.model_fields:
        assert env_name(name) + "=" in text


def test_env_example_copied_to_dotenv_gives_the_defaults(monkeypatch):
    from pathlib import Path

    for name in list(__import__("os").environ):
        if name.startswith("EXAI_"):
            monkeypatch.delenv(name)
    example = Path(__file__).parent.parent / ".env.example"
    assert load_settings(_env_file=str(example)) == load_settings(_env_file=None)


def test_settings_reference_is_generated_from_the_settings():
    """docs/settings.md documents every setting; regenerate it with `exai config --reference`."""
    from pathlib import Path

    from exai.settings import Settings, env_name, settings_reference

    text = (Path(__file__).parent.parent / "docs" / "settings.md").read_text()
    assert text == settings_reference()
    assert all(f"| `{env_name(name)}`" in text for name in Settings.model_fields)


def test_the_user_settings_file_is_read_below_dotenv_and_the_environment(tmp_path, monkeypatch):
    """~/.config/exai/env is read wherever exai runs; ./.env wins over it, the
    environment over both."""
    from exai.settings import user_env_file

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("EXAI_WS_PORT", "EXAI_LOG_LEVEL", "EXAI_WS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    user = user_env_file()
    assert user == tmp_path / "config" / "exai" / "env"
    user.parent.mkdir(parents=True)
    user.write_text("EXAI_WS_PORT=1111\nEXAI_LOG_LEVEL=debug\nEXAI_WS_TOKEN=from-the-user-file\n")
    local = tmp_path / ".env"
    local.write_text("EXAI_WS_PORT=2222\n")
    monkeypatch.setenv("EXAI_LOG_LEVEL", "error")
    s = load_settings(_env_file=(user, local))
    assert (s.ws_port, s.log_level) == (2222, "error")
    assert s.ws_token.get_secret_value() == "from-the-user-file"


def test_a_bad_token_list_is_one_line_naming_the_setting_not_the_token(monkeypatch):
    monkeypatch.setenv("EXAI_WS_TOKENS", "alice=ok-token,bob:leaky-token-value")
    with pytest.raises(SettingsError) as info:
        load_settings(_env_file=None)
    [line] = info.value.problems
    assert line.startswith("EXAI_WS_TOKENS: entry 2 of 2 is not principal=token")
    assert "leaky-token-value" not in str(info.value) and "\n" not in str(info.value)


def test_a_short_jwt_secret_gets_exais_own_message(monkeypatch):
    monkeypatch.setenv("EXAI_JWT_SECRET", "0123456789")
    with pytest.raises(SettingsError) as info:
        load_settings(_env_file=None)
    assert str(info.value).startswith("EXAI_JWT_SECRET: 10 bytes is too short for HS256")
    assert "0123456789" not in str(info.value)


def test_misspelt_names_are_found_in_every_source_with_the_closest_setting():
    from exai.settings import misspelt
    from exai.settings.sources import Source

    sources = [Source("the environment", {"EXAI_WS_PROT": "1", "PATH": "/bin", "GLM_HOME": "x"}),
               Source("/p/.env", {"KIMI_APIKEY": "k", "EXAI_WS_PORT": "1"}),
               Source("/u/env", {"ZHIPUAI_TOKEN": "z", "EXAI_BENCH_MCP": "1"})]  # fmt: skip
    found = misspelt(sources)
    assert [line.split(" is not")[0] for line in found] == [
        "EXAI_WS_PROT (set in the environment)", "KIMI_APIKEY (set in /p/.env)",
        "ZHIPUAI_TOKEN (set in /u/env)"]  # fmt: skip
    assert [line.rsplit(" ", 1)[1] for line in found] == [
        "EXAI_WS_PORT?", "KIMI_API_KEY?", "ZHIPUAI_API_KEY?"]  # fmt: skip


def test_changed_names_the_source_that_wins_and_leaves_defaults_out(monkeypatch):
    from exai.settings import changed
    from exai.settings.sources import Source

    environment = {"EXAI_WS_PORT": "9001", "EXAI_WS_HOST": "127.0.0.1", "ZAI_API_KEY": "zk"}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(_env_file=None)
    sources = [Source("the environment", environment), Source("/p/.env", {"EXAI_WS_PORT": "7000"})]
    rows = {name: (value, where) for name, value, where in changed(settings, sources)}
    assert rows == {"EXAI_WS_PORT": (9001, "the environment"),
                    "GLM_API_KEY": ("****", "the environment, as ZAI_API_KEY")}  # fmt: skip


def test_the_http_faces_are_turned_off_by_name_and_an_empty_value_is_the_default(monkeypatch):
    from exai.settings import load_settings

    monkeypatch.setenv("EXAI_HTTP_PORT", "off")
    assert load_settings().http_port is None
    monkeypatch.setenv("EXAI_HTTP_PORT", "")
    assert load_settings().http_port == 8078
