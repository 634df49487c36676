"""The daemon the real clients call: the docs' token, both providers on the emulator."""

from __future__ import annotations

from exai.emulators.provider import EmulatorServer

__all__ = ["DOC_TOKEN", "daemon_env"]

# The token the docs' snippets carry; the daemon accepts it so the snippets run as written.
DOC_TOKEN = "paste-your-token"


def daemon_env(emulator: EmulatorServer) -> dict[str, str]:
    return {
        "EXAI_WS_TOKEN": DOC_TOKEN,
        "EXAI_KIMI_API_KEY": "sk-test-kimi",
        "EXAI_KIMI_BASE_URL": emulator.base_url_kimi,
        "EXAI_GLM_API_KEY": "test-glm-key",
        "EXAI_GLM_BASE_URL": emulator.base_url_glm,
        "EXAI_PROVIDER_MAX_RETRIES": "0",
        "EXAI_PROGRESS_INTERVAL_S": "5",
    }
