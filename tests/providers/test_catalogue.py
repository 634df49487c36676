"""The model catalogue: built-in data, the override file, validation, request fitting."""

from __future__ import annotations

from pathlib import Path

import pytest

from exai.providers.base import ChatRequest
from exai.providers.catalogue import CatalogueError, load_catalogue

from .helpers import user


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


KIMI_MODELS = ("kimi-k3", "kimi-k2.7-code", "kimi-k2.7-code-highspeed", "kimi-k2.6")
GLM_MODELS = ("glm-5.3", "glm-5.2", "glm-5.1", "glm-5", "glm-5-turbo", "glm-4.7", "glm-4.7-flash",
              "glm-5v-turbo", "glm-4.6", "glm-4.5", "glm-4.5-air", "glm-4.5-flash",
              "glm-4.5v")  # fmt: skip
RETIRED_KIMI = ("kimi-k2.5", "kimi-k2-thinking", "moonshot-v1-8k", "moonshot-v1-32k",
                "moonshot-v1-128k", "moonshot-v1-auto", "kimi-latest")  # fmt: skip


def test_builtin_catalogue_covers_current_models() -> None:
    catalogue = load_catalogue()
    assert {catalogue.get(name).provider for name in KIMI_MODELS} == {"kimi"}
    assert {catalogue.get(name).provider for name in GLM_MODELS} == {"glm"}
    k3 = catalogue.get("kimi-k3")
    assert k3.thinking == "always" and k3.reasoning_efforts == ("low", "high", "max")
    assert k3.default_effort == "max" and k3.fixed_temperature and k3.fixed_top_p == 0.95
    assert not k3.web_search and "required" in k3.tool_choice_thinking
    for code in ("kimi-k2.7-code", "kimi-k2.7-code-highspeed"):
        assert catalogue.get(code).thinking == "always" and catalogue.get(code).preserved_thinking
    assert catalogue.get("glm-5.3").thinking == "always"
    assert catalogue.get("glm-5.3").reasoning_efforts[0] == "minimal"
    assert catalogue.get("glm-5.2").thinking == "switchable"
    assert catalogue.get("glm-5.2").reasoning_efforts[0] == "none"
    assert catalogue.get("glm-4.5v").images
    assert catalogue.get("kimi-k3").context_window == 1_048_576


def test_retired_kimi_models_are_no_longer_served() -> None:
    catalogue = load_catalogue()
    for name in RETIRED_KIMI:
        assert catalogue.get(name) is None and name not in catalogue.names()
        gone = catalogue.retired(name)
        assert gone is not None and gone.provider == "kimi"
        assert catalogue.get(gone.successor) is not None  # a current model
    assert catalogue.retired("kimi-thinking").name == "kimi-k2-thinking"  # an old alias
    assert catalogue.retired("kimi-latest").successor == "kimi-k3"


def test_aliases_resolve_case_insensitively() -> None:
    catalogue = load_catalogue()
    assert catalogue.get("K2").name == "kimi-k2.6"
    assert catalogue.get(" glm ").name == "glm-5.3"
    assert catalogue.get("KIMI").name == "kimi-k3"
    assert catalogue.get("nope") is None


def test_override_changes_fields_and_adds_models(tmp_path: Path) -> None:
    path = write(tmp_path, """
[models."glm-4.6"]
context_window = 150000
aliases = ["g"]

[models."llama3.1:8b"]
provider = "openai_compat"
context_window = 131072
max_output_tokens = 4096
temperature = [0.0, 2.0]
auto_rank = 5
""")  # fmt: skip
    catalogue = load_catalogue(path)

    glm = catalogue.get("g")
    assert glm is not None and glm.context_window == 150000
    assert glm.web_search and glm.max_output_tokens == 128000  # untouched fields stay
    local = catalogue.get("llama3.1:8b")
    assert (
        local is not None and local.provider == "openai_compat" and local.model_id == "llama3.1:8b"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[models."x"]\nprovider = "glm"\n', "context_window"),
        ('[models."glm-4.6"]\ncontext_window = -1\n', "context_window"),
        ('[models."glm-4.6"]\nthinking = "sometimes"\n', "thinking"),
        ('[models."glm-4.6"]\ncolour = "blue"\n', "colour"),
        ('[models."glm-4.6"]\ntemperature = [1.0, 0.0]\n', "empty"),
        ('[models."glm-4.6"]\ncontext_window = 1000\n', "exceeds context_window"),
        (
            '[models."x"]\nprovider = "glm"\ncontext_window = 10\nmax_output_tokens = 5\n'
            'aliases = ["glm"]\n',
            "already",
        ),
        ("[stuff]\n", "unknown top-level"),
        ("not toml = = =", "not valid TOML"),
    ],
)
def test_invalid_override_names_the_problem(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(CatalogueError, match=words):
        load_catalogue(write(tmp_path, text))


def test_missing_override_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="cannot read"):
        load_catalogue(tmp_path / "absent.toml")


def test_discovered_models_take_provider_defaults() -> None:
    catalogue = load_catalogue()
    added = catalogue.add_discovered("openai_compat", ["qwen2.5:7b", "glm-4.6"])

    assert added == ["qwen2.5:7b"]  # a catalogue name is never shadowed
    info = catalogue.get("qwen2.5:7b")
    assert info is not None and info.context_window == 32768 and info.temperature == (0.0, 2.0)
    assert info.auto_rank is None  # discovered models are never picked by "auto"


def test_fit_sends_only_what_the_model_accepts() -> None:
    catalogue = load_catalogue()
    request = ChatRequest(model="alias", messages=user("x"), temperature=1.7,
                          max_output_tokens=10**6, thinking=True, web_search=True)  # fmt: skip

    always = catalogue.get("glm-5.3").fit(request)
    assert always.model == "glm-5.3"
    assert always.temperature == 1.0 and always.max_output_tokens == 131072
    assert always.thinking is None  # always on: there is no switch to send
    kimi = catalogue.get("kimi-k3").fit(request)
    assert kimi.temperature is None and kimi.thinking is None  # fixed; no switch
    assert kimi.web_search is False  # K3 cannot search
    glm = catalogue.get("glm-4.5v").fit(request)
    assert glm.thinking is True and glm.web_search is False
    assert always.thinks is True and kimi.thinks is True and glm.thinks is True


def test_a_default_temperature_is_sent_when_none_is_asked(tmp_path: Path) -> None:
    path = write(tmp_path, """
[models."local"]
provider = "openai_compat"
context_window = 8192
max_output_tokens = 4096
temperature = [0.0, 1.0]
default_temperature = 0.3
""")  # fmt: skip
    default = load_catalogue(path).get("local").fit(ChatRequest(model="k", messages=[]))
    assert default.temperature == 0.3 and default.max_output_tokens is None
    assert default.thinks is False


def test_a_model_with_a_fixed_temperature_is_sent_none() -> None:
    catalogue = load_catalogue()
    asked = ChatRequest(model="k", messages=[], temperature=0.2, thinking=False)
    fitted = catalogue.get("kimi-k2.6").fit(asked)
    assert fitted.temperature is None  # Moonshot fixes it and refuses any other
    assert fitted.thinking is False and fitted.thinks is False
    assert catalogue.get("kimi").fit(ChatRequest(model="k", messages=[])).thinks is True


def test_current_models_carry_the_vendors_prices() -> None:
    catalogue = load_catalogue()
    assert catalogue.get("kimi-k2.6").price.describe() == {
        "currency": "USD",
        "input": 0.95,
        "cached_input": 0.16,
        "output": 4.0,
        "per": "1M tokens",
        "web_search_call": 0.005,  # each $web_search, in USD
    }
    assert catalogue.get("glm-5.1").describe()["price"]["cached_input"] == 0.26
    assert catalogue.get("kimi-k3").describe()["price"] == {
        "currency": "USD",
        "input": 3.0,
        "cached_input": 0.3,
        "output": 15.0,
        "per": "1M tokens",
    }
    assert catalogue.get("glm-4.7-flash").price is None  # no confirmed price: no cost


def test_the_reported_windows_hold() -> None:
    catalogue = load_catalogue()
    assert catalogue.get("kimi-k2.6").context_window == 262_144
    assert catalogue.get("kimi-k2.6").thinking == "switchable"
    for name in ("glm-4.7", "glm-5", "glm-5.1", "glm-5-turbo"):
        info = catalogue.get(name)
        assert (info.context_window, info.max_output_tokens, info.thinking) == (
            200_000,
            128_000,
            "switchable",
        )


def test_retired_models_are_not_models_but_name_a_successor() -> None:
    catalogue = load_catalogue()
    assert catalogue.get("kimi-k2-0905-preview") is None
    gone = catalogue.retired("kimi-k2-turbo")  # an alias of a retired model
    assert gone is not None and gone.name == "kimi-k2-turbo-preview"
    assert gone.message("kimi-k2-turbo") == "kimi-k2-turbo was retired by Moonshot; use kimi-k2.6"
    assert "kimi-k2-0905-preview" not in catalogue.names()
    assert catalogue.add_discovered("kimi", ["kimi-latest"]) == []  # never brought back


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[models."kimi-latest"]\nsuccessor = "kimi-k2-0905-preview"\n', "not a current model"),
        (
            '[models."old"]\nprovider = "glm"\nretired = true\nsuccessor = "nope"\n',
            "not a current model",
        ),
        (
            '[models."old"]\nprovider = "glm"\nretired = "yes"\nsuccessor = "glm-5"\n',
            "true or false",
        ),
        (
            '[models."old"]\nprovider = "glm"\nretired = true\nsuccessor = "glm-5"\n'
            'aliases = ["glm"]\n',
            "already",
        ),
    ],
)
def test_a_bad_retirement_is_refused_on_load(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(CatalogueError, match=words):
        load_catalogue(write(tmp_path, text))


def test_an_override_can_bring_a_retired_model_back(tmp_path: Path) -> None:
    path = write(tmp_path, """
[models."kimi-k2-0905-preview"]
retired = false
context_window = 262144
max_output_tokens = 32768
""")  # fmt: skip
    info = load_catalogue(path).get("kimi-k2-0905-preview")
    assert info is not None and info.provider == "kimi" and info.context_window == 262144
