"""Bridged tool names and the servers file, without any server running."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from exai.bridge.config import BridgeConfigError, load_config
from exai.bridge.names import MAX_NAME, assign_names, sanitize
from exai.bridge.tool import RemoteArguments

_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_plain_names_are_server__tool():
    assert assign_names([("files", "read"), ("git", "log")]) == {
        ("files", "read"): "files__read", ("git", "log"): "git__log"}  # fmt: skip


def test_unsafe_characters_are_replaced():
    assert sanitize("my server.v2/tool") == "my_server_v2_tool"
    assert assign_names([("a.b", "c d")]) == {("a.b", "c d"): "a_b__c_d"}


def test_collisions_get_stable_suffixes_whatever_the_order():
    pairs = [("a.b", "t"), ("a_b", "t"), ("x", "y")]
    names = assign_names(pairs)
    assert names == assign_names(list(reversed(pairs)))
    assert names[("x", "y")] == "x__y"
    assert names[("a.b", "t")] != names[("a_b", "t")]
    assert all(n.startswith("a_b__t_") for p, n in names.items() if p[1] == "t")
    assert all(_SAFE.match(n) for n in names.values())


def test_long_names_are_cut_to_64_with_a_suffix_and_stay_distinct():
    server, long_a, long_b = "s" * 30, "t" * 60 + "a", "t" * 60 + "b"
    names = assign_names([(server, long_a), (server, long_b)])
    assert all(len(n) == MAX_NAME and _SAFE.match(n) for n in names.values())
    assert len(set(names.values())) == 2


def test_names_of_daemon_tools_are_never_taken():
    names = assign_names([("echo", "x")], reserved={"echo__x"})
    assert names[("echo", "x")] != "echo__x" and names[("echo", "x")].startswith("echo__x_")


def test_remote_arguments_accept_any_object():
    args = RemoteArguments.model_validate({"a": 1, "nested": {"b": [1, 2]}, "title": "x"})
    assert args.model_extra == {"a": 1, "nested": {"b": [1, 2]}, "title": "x"}


def _write(tmp_path: Path, servers: object) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_config_reads_claude_desktop_shape_and_expands_variables(tmp_path):
    path = _write(tmp_path, {
        "files": {"command": "npx", "args": ["-y", "server", "${ROOT}"], "env": {"K": "${KEY}"},
                  "deny": ["write_*"], "timeout_s": 5},
        "search": {"url": "https://example.test/mcp",
                   "headers": {"Authorization": "Bearer ${TOKEN}"}, "type": "http"},
    })  # fmt: skip
    config = load_config(path, {"ROOT": "/srv", "KEY": "k1", "TOKEN": "t1"})
    files, search = config.servers["files"], config.servers["search"]
    assert files.transport == "stdio" and files.args == ["-y", "server", "/srv"]
    assert files.env == {"K": "k1"} and files.timeout_s == 5
    assert search.transport == "http" and search.headers["Authorization"] == "Bearer t1"
    assert files.permits("read_file") and not files.permits("write_file")


def test_allow_list_limits_and_deny_wins():
    from exai.bridge.config import ServerConfig

    server = ServerConfig(command="x", allow=["read_*", "list"], deny=["read_secret"])
    assert server.permits("read_file") and server.permits("list")
    assert not server.permits("read_secret") and not server.permits("delete")


@pytest.mark.parametrize(
    ("servers", "problem"),
    [
        ({"x": {"command": "a", "url": "http://b"}}, "either 'command'"),
        ({"x": {}}, "either 'command'"),
        ({"x": {"url": "ftp://b"}}, "http:// or https://"),
        ({"x": {"command": "a", "timeout_s": -1}}, "timeout_s"),
    ],
)
def test_invalid_servers_are_reported_with_the_file_and_field(tmp_path, servers, problem):
    path = _write(tmp_path, servers)
    with pytest.raises(BridgeConfigError, match=re.escape(problem)) as info:
        load_config(path, {})
    assert str(path) in str(info.value)


def test_unreadable_or_malformed_file_is_a_clear_error(tmp_path):
    with pytest.raises(BridgeConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(BridgeConfigError, match="not valid JSON"):
        load_config(bad)
