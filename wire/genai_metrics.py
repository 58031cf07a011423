"""The OpenTelemetry GenAI token-usage metrics of the records an edge builds, pushed over OTLP/HTTP
to a collector the operator names (COSTPLATFORM_OTLP_METRICS_ENDPOINT; off without it). Both edges
emit them alike: the vLLM server (serving/, provider `vllm`) and the proxy (collectors/proxy.py,
provider its upstream's), each observing every record as wire.edge.hand_on passes it on.

Names, units and attributes follow the GenAI semantic conventions as the
open-telemetry/semantic-conventions-genai repository writes them (docs/gen-ai/gen-ai-token-metrics.md,
model/gen-ai/token-metrics.yaml at commit 066d4a7f, on core semantic conventions v1.44.0); the
older `gen_ai.client.token.usage` histogram, which core v1.44.0 keeps only as deprecated, is
emitted beside them unless COSTPLATFORM_OTLP_METRICS_DEPRECATED=0. docs/serving.md lists them.

`TokenMetrics.observe` runs on the edge's record thread once a record is built: it only adds to the
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
from urllib.parse import urlsplit

log = logging.getLogger("costplatform.wire")

ENV_ENDPOINT = "COSTPLATFORM_OTLP_METRICS_ENDPOINT"
ENV_DEPRECATED = "COSTPLATFORM_OTLP_METRICS_DEPRECATED"
# The service an edge's metrics come from where the environment names none.
SERVING_SERVICE = "costplatform-serving"
PROXY_SERVICE = "costplatform-proxy"

# The vLLM server's gen_ai.provider.name: vLLM is no provider the conventions list; they allow a
# custom value. The proxy names its upstream's (provider_of).
PROVIDER = "vllm"
# An upstream whose host names no provider the conventions list: an OpenAI-compatible server of
# the operator's (a custom value; the operator may name another).
OPENAI_COMPATIBLE = "openai_compatible"
# The conventions' gen_ai.provider.name of the hosted APIs, by the upstream's host.
PROVIDER_HOSTS = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "api.deepseek.com": "deepseek",
    "api.mistral.ai": "mistral_ai",
    "api.groq.com": "groq",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "aiplatform.googleapis.com": "gcp.vertex_ai",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
}
# ... and by the end of it (the Azure resources, the Bedrock regions).
PROVIDER_HOST_SUFFIXES = {
    ".openai.azure.com": "azure.ai.openai",
    ".services.ai.azure.com": "azure.ai.inference",
    ".aiplatform.googleapis.com": "gcp.vertex_ai",
    ".amazonaws.com": "aws.bedrock",
}
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
    "messages": "chat",
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


def provider_of(upstream: str) -> str:
    """The gen_ai.provider.name of an upstream URL: the conventions' name of a hosted API it is
    known by, else OPENAI_COMPATIBLE."""
    host = (urlsplit(upstream if "//" in upstream else f"//{upstream}").hostname or "").lower()
    if host in PROVIDER_HOSTS:
        return PROVIDER_HOSTS[host]
    suffix = next((s for s in PROVIDER_HOST_SUFFIXES if host.endswith(s)), None)
    return PROVIDER_HOST_SUFFIXES[suffix] if suffix else OPENAI_COMPATIBLE


def attributes(record: Mapping[str, Any], served_model: str | None, provider: str = PROVIDER) -> dict[str, str]:
    """The attributes every token metric of a record shares (gen_ai.operation.name,
    gen_ai.provider.name, gen_ai.request.model, gen_ai.response.model)."""
    return {
        "gen_ai.operation.name": OPERATIONS.get(str(record.get("endpoint")), "text_completion"),
        "gen_ai.provider.name": provider,
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
    """The instruments, on a MeterProvider of their own that exports to `endpoint`: the metrics of
    one edge, whose records are served by `provider` and which names itself `service` where the
    environment names no service (OTEL_SERVICE_NAME)."""

    def __init__(
        self,
        endpoint: str,
        *,
        provider: str = PROVIDER,
        service: str = SERVING_SERVICE,
        deprecated: bool = True,
        export_interval_ms: float | None = None,
    ) -> None:
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
            resource=resource(service),
            metric_readers=[reader],
            views=[View(instrument_name=name, aggregation=buckets) for name in histograms],
        )
        self.gen_ai_provider = provider
        meter = self.provider.get_meter("costplatform.wire")
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
    def from_env(
        cls, *, endpoint: str | None = None, provider: str = PROVIDER, service: str = SERVING_SERVICE
    ) -> TokenMetrics | None:
        """The metrics the environment (or `endpoint`) asks for; None when off, or (logged) when
        the SDK is missing: the records matter more than their metrics."""
        endpoint = endpoint or endpoint_from_env()
        if endpoint is None:
            return None
        if missing := missing_packages():
            log.error("%s is set but %s not installed: no metrics pushed", ENV_ENDPOINT, ", ".join(missing))
            return None
        deprecated = os.environ.get(ENV_DEPRECATED, "1") not in ("0", "false", "no", "off")
        return cls(endpoint, provider=provider, service=service, deprecated=deprecated)

    def observe(self, record: Mapping[str, Any], served_model: str | None = None) -> None:
        """Add one record's tokens (a record v1 as wire.record builds it)."""
        common = attributes(record, served_model, self.gen_ai_provider)
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


def resource(service: str = SERVING_SERVICE) -> Any:
    """The SDK's resource from the environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES), named
    `service` where they name no service."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    found = Resource.create()
    if str(found.attributes.get(SERVICE_NAME, "unknown_service")).startswith("unknown_service"):
        return found.merge(Resource({SERVICE_NAME: service}))
    return found


_COUNTERS = {
    USAGE_INPUT: "The number of input (prompt) tokens used, including cached tokens.",
    USAGE_OUTPUT: "The number of output (completion) tokens used, including reasoning tokens.",
    USAGE_CACHE_READ: "The number of input tokens served from a provider-managed cache.",
    USAGE_CACHE_WRITE: "The number of input tokens written to a provider-managed cache.",
    USAGE_REASONING: "The number of output tokens used for reasoning (e.g. chain-of-thought, extended thinking).",
}
