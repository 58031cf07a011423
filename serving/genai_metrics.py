"""The OpenTelemetry GenAI token-usage metrics of the records this server builds, pushed over
OTLP/HTTP to a collector the operator names (COSTPLATFORM_OTLP_METRICS_ENDPOINT; off without it).

Names, units and attributes follow the GenAI semantic conventions as the
open-telemetry/semantic-conventions-genai repository writes them (docs/gen-ai/gen-ai-token-metrics.md,
model/gen-ai/token-metrics.yaml at commit 066d4a7f, on core semantic conventions v1.44.0); the
older `gen_ai.client.token.usage` histogram, which core v1.44.0 keeps only as deprecated, is
emitted beside them unless COSTPLATFORM_OTLP_METRICS_DEPRECATED=0. docs/serving.md lists them.

`TokenMetrics.observe` runs on the emitter's thread once a record is built: it only adds to the
SDK's in-memory aggregates. The SDK's PeriodicExportingMetricReader exports them from a thread
of its own (every OTEL_METRIC_EXPORT_INTERVAL ms, 60 s by default), so neither the request nor
the record builder waits on the collector. The OpenTelemetry SDK and its OTLP/HTTP exporter are
imported only when the endpoint is set.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("costplatform.serving")

ENV_ENDPOINT = "COSTPLATFORM_OTLP_METRICS_ENDPOINT"
ENV_DEPRECATED = "COSTPLATFORM_OTLP_METRICS_DEPRECATED"

# vLLM is no provider the conventions list; they allow a custom value.
PROVIDER = "vllm"
# The record does not split its tokens by modality: the conventions then ask for `unknown`.
MODALITY = "unknown"
# The conventions' bucket boundaries for the per-operation token histograms.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)

# The record's endpoint as the conventions' gen_ai.operation.name. A record without an endpoint
# (the engine's counts of a request no middleware watched) is a prompt completed: text_completion.
OPERATIONS = {
    "chat.completions": "chat",
    "responses": "chat",
    "completions": "text_completion",
    "embeddings": "embeddings",
}
# error.type of a record that did not end well: the record's status, `_OTHER` for a plain error.
ERROR_TYPES = {"error": "_OTHER", "timeout": "timeout", "aborted": "aborted", "rejected": "rejected"}

USAGE_INPUT = "gen_ai.client.inference.usage.input_tokens"
USAGE_OUTPUT = "gen_ai.client.inference.usage.output_tokens"
USAGE_CACHE_READ = "gen_ai.client.inference.usage.cache_read.input_tokens"
USAGE_CACHE_WRITE = "gen_ai.client.inference.usage.cache_write.input_tokens"
USAGE_REASONING = "gen_ai.client.inference.usage.reasoning.output_tokens"
OPERATION_INPUT = "gen_ai.client.inference.operation.input_tokens"
OPERATION_OUTPUT = "gen_ai.client.inference.operation.output_tokens"
TOKEN_USAGE = "gen_ai.client.token.usage"
UNIT = "{token}"

# The record's prompt-cache writes (tokens.prompt_cache_write; absent: none).
CACHE_WRITE_FIELD = "prompt_cache_write"


# What the push needs besides the platform's own dependencies.
PACKAGES = {
    "opentelemetry.sdk.metrics": "opentelemetry-sdk",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter": "opentelemetry-exporter-otlp-proto-http",
}


def endpoint_from_env() -> str | None:
    return os.environ.get(ENV_ENDPOINT) or None


def missing_packages() -> list[str]:
    """The distributions to install before the metrics can be pushed (none: ready)."""
    out = []
    for module, package in PACKAGES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            out.append(package)
    return out


def attributes(record: Mapping[str, Any], served_model: str | None) -> dict[str, str]:
    """The attributes every token metric of a record shares (gen_ai.operation.name,
    gen_ai.provider.name, gen_ai.request.model, gen_ai.response.model)."""
    return {
        "gen_ai.operation.name": OPERATIONS.get(str(record.get("endpoint")), "text_completion"),
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": str(record["model"]),
        "gen_ai.response.model": served_model or str(record["model"]),
    }


def usage(record: Mapping[str, Any]) -> dict[str, int]:
    """A record's token counts under the conventions' names. Input includes cache reads and
    writes, output includes reasoning, as the record's prompt and completion do."""
    tokens = record["tokens"]
    return {
        USAGE_INPUT: int(tokens.get("prompt", 0)),
        USAGE_OUTPUT: int(tokens.get("completion", 0)),
        USAGE_CACHE_READ: int(tokens.get("prompt_cached", 0)),
        USAGE_CACHE_WRITE: int(tokens.get(CACHE_WRITE_FIELD, 0)),
        USAGE_REASONING: int(tokens.get("reasoning", 0)),
    }


class TokenMetrics:
    """The instruments, on a MeterProvider of their own that exports to `endpoint`."""

    def __init__(self, endpoint: str, *, deprecated: bool = True, export_interval_ms: float | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=endpoint), export_interval_millis=export_interval_ms
        )
        buckets = ExplicitBucketHistogramAggregation(boundaries=TOKEN_BUCKETS)
        histograms = (OPERATION_INPUT, OPERATION_OUTPUT, TOKEN_USAGE)
        self.provider = MeterProvider(
            resource=resource(),
            metric_readers=[reader],
            views=[View(instrument_name=name, aggregation=buckets) for name in histograms],
        )
        meter = self.provider.get_meter("costplatform.serving")
        self.counters = {
            name: meter.create_counter(name, unit=UNIT, description=brief) for name, brief in _COUNTERS.items()
        }
        self.operation_input = meter.create_histogram(
            OPERATION_INPUT, unit=UNIT, description="The number of input (prompt) tokens used per inference operation."
        )
        self.operation_output = meter.create_histogram(
            OPERATION_OUTPUT,
            unit=UNIT,
            description="The number of output (completion) tokens used per inference operation.",
        )
        self.token_usage = (
            meter.create_histogram(TOKEN_USAGE, unit=UNIT, description="Number of input and output tokens used.")
            if deprecated
            else None
        )

    @classmethod
    def from_env(cls) -> TokenMetrics | None:
        """The metrics the environment asks for; None when off, or (logged) when the SDK is missing:
        the records matter more than their metrics."""
        endpoint = endpoint_from_env()
        if endpoint is None:
            return None
        if missing := missing_packages():
            log.error("%s is set but %s not installed: no metrics pushed", ENV_ENDPOINT, ", ".join(missing))
            return None
        deprecated = os.environ.get(ENV_DEPRECATED, "1") not in ("0", "false", "no", "off")
        return cls(endpoint, deprecated=deprecated)

    def observe(self, record: Mapping[str, Any], served_model: str | None = None) -> None:
        """Add one record's tokens (a record v1 as wire.record builds it)."""
        common = attributes(record, served_model)
        counts = usage(record)
        per_modality = {**common, "gen_ai.token.modality": MODALITY}
        for name, counter in self.counters.items():
            counter.add(counts[name], per_modality)
        status = record["outcome"]["status"]
        operation = common if status == "ok" else {**common, "error.type": ERROR_TYPES.get(status, "_OTHER")}
        self.operation_input.record(counts[USAGE_INPUT], operation)
        self.operation_output.record(counts[USAGE_OUTPUT], operation)
        if self.token_usage is not None:
            self.token_usage.record(counts[USAGE_INPUT], {**common, "gen_ai.token.type": "input"})
            self.token_usage.record(counts[USAGE_OUTPUT], {**common, "gen_ai.token.type": "output"})

    def flush(self, timeout_ms: float = 10_000) -> bool:
        return bool(self.provider.force_flush(timeout_ms))

    def shutdown(self) -> None:
        self.provider.shutdown()


def resource() -> Any:
    """The SDK's resource from the environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES), named
    costplatform-serving where they name no service."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    found = Resource.create()
    if str(found.attributes.get(SERVICE_NAME, "unknown_service")).startswith("unknown_service"):
        return found.merge(Resource({SERVICE_NAME: "costplatform-serving"}))
    return found


_COUNTERS = {
    USAGE_INPUT: "The number of input (prompt) tokens used, including cached tokens.",
    USAGE_OUTPUT: "The number of output (completion) tokens used, including reasoning tokens.",
    USAGE_CACHE_READ: "The number of input tokens served from a provider-managed cache.",
    USAGE_CACHE_WRITE: "The number of input tokens written to a provider-managed cache.",
    USAGE_REASONING: "The number of output tokens used for reasoning (e.g. chain-of-thought, extended thinking).",
}
