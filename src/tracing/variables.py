"""The standard OpenTelemetry variables of an OTLP/HTTP span export, read as the SDK reads them.

The endpoint, the headers, the service name and the sampler come through
:class:`~exai.settings.Settings` (so ``.env`` works for them); the rest are
read from the environment here, with the SDK's names, meanings and defaults,
because the span writer process that exports is started without them
(:mod:`exai.tracing.link`) and gets what they say over its pipe:

- ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, else ``OTEL_EXPORTER_OTLP_TIMEOUT``:
  seconds per export, retries included (10);
- ``OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION``: ``gzip``, ``deflate`` or
  ``none``; ``..._CERTIFICATE``, ``..._CLIENT_CERTIFICATE``,
  ``..._CLIENT_KEY``: files for TLS to the collector;
- ``OTEL_BSP_SCHEDULE_DELAY`` (ms, 5000), ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``
  (512) and ``OTEL_BSP_MAX_QUEUE_SIZE``: the batching. The queue's default is
  65,536 spans rather than the SDK's 2,048: spans reach the writer in frames
  of a batch each, a few thousand a second from a busy daemon, and the SDK's
  default would drop spans while the collector is up.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    ParentBasedTraceIdRatio,
    Sampler,
    TraceIdRatioBased,
)

from exai.tracing.post import PostOptions

__all__ = [
    "Batching",
    "batching",
    "export_timeout_s",
    "headers_from",
    "post_options",
    "refuse_unapplied",
    "sampler_from",
    "traces_url",
]

_DEFAULT_TIMEOUT_S: Final = 10.0  # the SDK's
_COMPRESSIONS: Final = ("none", "gzip", "deflate")


@dataclass(frozen=True, slots=True)
class Batching:
    delay_s: float = 5.0
    batch_size: int = 512
    max_queue: int = 65536


def traces_url(endpoint: str | None, traces_endpoint: str | None) -> str | None:
    """Where spans are posted: the traces endpoint as given, else ``<endpoint>/v1/traces``."""
    if traces_endpoint:
        return traces_endpoint
    if endpoint:
        return endpoint.rstrip("/") + "/v1/traces"
    return None


def headers_from(text: str | None) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS``: ``k1=v1,k2=v2``, values URL-encoded (W3C baggage format).

    Raises ValueError on a pair without ``=`` (a typo would otherwise send no key).
    """
    out: dict[str, str] = {}
    for pair in (text or "").split(","):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError("expected key=value pairs separated by commas")
        out[unquote(key.strip())] = unquote(value.strip())
    return out


def export_timeout_s(environ: Mapping[str, str] = os.environ) -> float:
    """The exporter's timeout in seconds, from the variables the SDK reads, as it reads them."""
    raw = environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or environ.get(
        "OTEL_EXPORTER_OTLP_TIMEOUT"
    )
    try:
        value = float(raw) if raw else _DEFAULT_TIMEOUT_S
    except ValueError:
        return _DEFAULT_TIMEOUT_S
    return value if value > 0 else _DEFAULT_TIMEOUT_S


def post_options(url: str, headers: dict[str, str],
                 environ: Mapping[str, str] = os.environ) -> PostOptions:  # fmt: skip
    """How to post to ``url``; ValueError naming a variable whose value cannot be used."""

    def var(name: str) -> str | None:
        return environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or environ.get(
            f"OTEL_EXPORTER_OTLP_{name}"
        )

    compression = (var("COMPRESSION") or "none").strip().lower()
    if compression not in _COMPRESSIONS:
        raise ValueError(
            f"OTEL_EXPORTER_OTLP_COMPRESSION: expected one of {', '.join(_COMPRESSIONS)}"
        )
    return PostOptions(url=url, headers=headers, timeout_s=export_timeout_s(environ),
                       compression=compression, certificate=var("CERTIFICATE"),
                       client_certificate=var("CLIENT_CERTIFICATE"),
                       client_key=var("CLIENT_KEY"))  # fmt: skip


def batching(environ: Mapping[str, str] = os.environ) -> Batching:
    """``OTEL_BSP_*``; a value that is not a positive number keeps the default, as the SDK does."""
    default = Batching()

    def number(name: str, fallback: float) -> float:
        try:
            value = float(environ.get(name) or fallback)
        except ValueError:
            return fallback
        return value if value > 0 else fallback

    return Batching(
        delay_s=number("OTEL_BSP_SCHEDULE_DELAY", default.delay_s * 1000) / 1000,
        batch_size=int(number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", default.batch_size)),
        max_queue=int(number("OTEL_BSP_MAX_QUEUE_SIZE", default.max_queue)),
    )


def sampler_from(name: str, arg: float | None) -> Sampler:
    """The SDK sampler an ``OTEL_TRACES_SAMPLER`` name stands for."""
    rate = 1.0 if arg is None else arg
    samplers: dict[str, Callable[[], Sampler]] = {
        "always_on": lambda: ALWAYS_ON,
        "always_off": lambda: ALWAYS_OFF,
        "traceidratio": lambda: TraceIdRatioBased(rate),
        "parentbased_always_on": lambda: DEFAULT_ON,
        "parentbased_always_off": lambda: DEFAULT_OFF,
        "parentbased_traceidratio": lambda: ParentBasedTraceIdRatio(rate),
    }
    return samplers[name]()


_UNAPPLIED: Final = {
    "OTEL_PYTHON_EXPORTER_OTLP_CREDENTIAL_PROVIDER": "the span writer loads no credential "
    "provider; put the collector's credentials in OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_PYTHON_EXPORTER_OTLP_TRACES_CREDENTIAL_PROVIDER": "the span writer loads no "
    "credential provider; put the collector's credentials in OTEL_EXPORTER_OTLP_HEADERS",
}
_ONLY: Final = {
    "OTEL_EXPORTER_OTLP_PROTOCOL": ("http/protobuf",),
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": ("http/protobuf",),
    "OTEL_TRACES_EXPORTER": ("otlp",),
}


def refuse_unapplied(environ: Mapping[str, str] | None = None) -> None:
    """Raise ``ValueError`` naming an OpenTelemetry variable set to something the span
    writer would not do (a gRPC export, another exporter, a credential provider):
    with tracing on, a variable exai would leave unapplied stops the start."""
    environ = os.environ if environ is None else environ
    for name, why in _UNAPPLIED.items():
        if (environ.get(name) or "").strip():
            raise ValueError(f"{name} is not applied: {why}")
    for name, allowed in _ONLY.items():
        value = (environ.get(name) or "").strip()
        if value and value not in allowed:
            raise ValueError(f"{name}={value!r} is not applied: exai exports spans as "
                             f"{' or '.join(allowed)} only")  # fmt: skip
