"""The baseline collector's protocol client, for scripts that measure calls themselves.

Re-exported from :mod:`exai.baseline.client`::

    from scripts.baseline_collection.mcp_client import BaselineClient

    async with BaselineClient("ws://127.0.0.1:8079", token) as client:
        record = await client.measure("echo", {"text": "hi"})
        print(record.latency_ms, record.status, record.error_code)
"""

from exai.baseline.client import BaselineClient, ClientConfig
from exai.baseline.records import CallRecord

__all__ = ["BaselineClient", "CallRecord", "ClientConfig"]
