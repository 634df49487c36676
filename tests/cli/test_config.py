"""``exai config`` and ``exai serve`` on settings exai would ignore: a misspelt name is a
warning naming where it was set and the setting it was probably meant to be; ``exai
config --changed`` shows what differs from the defaults and where it came from."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.cli.helpers import clean_env, finish, free_port, listening, run_exai, spawn_exai


def _warnings(err: str) -> list[str]:
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.startswith("exai: warning: ")]


async def test_a_misspelt_name_in_the_environment_is_a_warning_naming_the_setting(tmp_path):
    env = clean_env(tmp_path, EXAI_WS_PROT="9000", KIMI_APIKEY="sk-never-shown-77",
                    GLM_API_TOKEN="glm-never-shown-77", EXAI_KIMI_API_KEY="sk-never-shown-78",
                    EXAI_NOTHING_LIKE_IT_AT_ALL="1")  # fmt: skip
    ran = await run_exai("config", env=env, cwd=tmp_path)
    assert ran.code == 0
    assert sorted(_warnings(ran.err)) == sorted([
        "exai: warning: EXAI_WS_PROT (set in the environment) is not an exai setting and is "
        "ignored; did you mean EXAI_WS_PORT?",
        "exai: warning: KIMI_APIKEY (set in the environment) is not an exai setting and is "
        "ignored; did you mean KIMI_API_KEY?",
        "exai: warning: GLM_API_TOKEN (set in the environment) is not an exai setting and is "
        "ignored; did you mean GLM_API_KEY?",
        "exai: warning: EXAI_KIMI_API_KEY (set in the environment) is not an exai setting and "
        "is ignored; did you mean KIMI_API_KEY?",
        "exai: warning: EXAI_NOTHING_LIKE_IT_AT_ALL (set in the environment) is not an exai "
        "setting and is ignored; `exai config --example` lists them",
    ])  # fmt: skip
    assert "never-shown" not in ran.err + ran.out


async def test_names_of_other_programs_are_not_warned_about(tmp_path):
    env = clean_env(tmp_path, GLM_HOME="/opt/glm", ZAI_REGION="eu", KIMI_THEME="dark",
                    DATABASE_URL="x", EXAI_RELIABILITY_SCALE="2", exai_ws_port="9001")  # fmt: skip
    ran = await run_exai("config", env=env, cwd=tmp_path)
    assert ran.code == 0 and _warnings(ran.err) == []


async def test_a_misspelt_name_in_either_file_names_the_file(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("GLM_API_TOKEN=glm-never-shown\nEXAI_WS_PORT=9001\n")
    user_file = tmp_path / "config" / "exai" / "env"  # clean_env's XDG_CONFIG_HOME
    user_file.parent.mkdir(parents=True)
    user_file.write_text("EXAI_LOG_LEVLE=debug\n")
    ran = await run_exai("config", env=clean_env(tmp_path), cwd=project)
    assert ran.code == 0
    assert sorted(_warnings(ran.err)) == [
        f"exai: warning: EXAI_LOG_LEVLE (set in {user_file}) is not an exai setting and is "
        "ignored; did you mean EXAI_LOG_LEVEL?",
        f"exai: warning: GLM_API_TOKEN (set in {project / '.env'}) is not an exai setting and "
        "is ignored; did you mean GLM_API_KEY?",
    ]


async def test_serve_warns_about_a_misspelt_name_and_starts_all_the_same(tmp_path):
    port = free_port()
    env = clean_env(tmp_path, EXAI_WS_PORT=str(port), EXAI_HTTP_PORT=str(free_port()),
                    EXAI_WS_TOKN="a-token-in-the-wrong-place")  # fmt: skip
    daemon = await spawn_exai("serve", env=env, cwd=tmp_path)
    try:
        for _ in range(600):
            if listening(port) or daemon.returncode is not None:
                break
            await asyncio.sleep(0.05)
        assert listening(port)
    finally:
        daemon.terminate()
        ran = await finish(daemon)
    assert _warnings(ran.err) == [
        "exai: warning: EXAI_WS_TOKN (set in the environment) is not an exai setting and is "
        "ignored; did you mean EXAI_WS_TOKEN?"
    ]
    assert "a-token-in-the-wrong-place" not in ran.err


async def test_config_changed_lists_what_differs_from_the_defaults_and_where_it_came_from(
    tmp_path: Path,
):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("EXAI_LOG_LEVEL=debug\nEXAI_WS_PORT=7000\n")
    user_file = tmp_path / "config" / "exai" / "env"
    user_file.parent.mkdir(parents=True)
    user_file.write_text("EXAI_WS_TOKEN=user-file-secret-0123456789\nEXAI_WS_HOST=127.0.0.1\n")
    env = clean_env(tmp_path, EXAI_WS_PORT="9001", MOONSHOT_API_KEY="sk-moon-secret")
    ran = await run_exai("config", "--changed", env=env, cwd=project)
    assert ran.code == 0, ran.err
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in ran.out.splitlines()}
    assert rows == {
        "EXAI_DATA_DIR": [str(tmp_path / "data"), "from the environment"],
        "EXAI_AUDIT_ENABLED": ["false", "from the environment"],
        "EXAI_LOG_LEVEL": ["warning", "from the environment"],  # the environment wins
        "EXAI_WS_PORT": ["9001", "from the environment"],
        "KIMI_API_KEY": ["****", "from the environment, as MOONSHOT_API_KEY"],
        "EXAI_WS_TOKEN": ["****", f"from {user_file}"],
    }  # EXAI_WS_HOST is set, to its default: not a change
    assert "secret" not in ran.out
    (project / ".env").write_text("EXAI_SHUTDOWN_GRACE_S=3\n")
    as_json = await run_exai("config", "--changed", "--json", env=env, cwd=project)
    data = json.loads(as_json.out)
    assert data["EXAI_SHUTDOWN_GRACE_S"] == {"value": 3.0, "from": str(project / ".env")}
    assert data["EXAI_WS_TOKEN"] == {"value": "****", "from": str(user_file)}


async def test_a_settings_file_that_is_not_text_is_one_line_naming_it(tmp_path):
    (tmp_path / ".env").write_bytes(b"EXAI_WS_PORT=9001\n\xff\xfe\n")
    for command in ("config", "serve"):
        ran = await run_exai(command, env=clean_env(tmp_path), cwd=tmp_path)
        assert ran.code == 2 and "Traceback" not in ran.err
        said = f"exai: cannot read the settings file {tmp_path / '.env'}: not UTF-8 text\n"
        assert ran.err == said, command
