"""The HAProxy configuration in docs/deploy.md is the one the tests run."""

from __future__ import annotations

import re
from pathlib import Path

from exai.emulators.haproxy import CONFIG

ROOT = Path(__file__).resolve().parents[2]


def test_the_deploy_guide_shows_the_haproxy_configuration_the_tests_use() -> None:
    guide = (ROOT / "docs" / "deploy.md").read_text()
    shown = re.search(r"```haproxy\n(.*?)```", guide, re.S)
    assert shown is not None, "docs/deploy.md has no ```haproxy block"
    assert shown.group(1) == CONFIG.read_text()
