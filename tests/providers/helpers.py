"""Small helpers shared by the provider tests."""

from __future__ import annotations

from typing import Any

from exai.providers.retry import RetryPolicy

__all__ = ["FAST_RETRY", "READ", "overlapping", "user"]

# A caller's function tool, as agents declare one.
READ = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}

# Retries exactly as the policy makes them, with backoff short enough for a test suite.
FAST_RETRY = RetryPolicy(max_retries=3, initial_backoff_s=0.01, max_backoff_s=0.05)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def overlapping(requests: list[dict[str, Any]]) -> bool:
    """True when every request arrived before any was answered: all were in
    flight at the same moment, as the emulator's clock saw it."""
    return max(r["received_at"] for r in requests) < min(r["answered_at"] for r in requests)
