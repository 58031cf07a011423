"""The stat-logger plugin: vLLM hands it every finished request's counts.

Registered under the entry point group `vllm.stat_logger_plugins`, so the OpenAI server's
AsyncLLM loads it by itself; it does nothing unless COSTPLATFORM_URL and
COSTPLATFORM_COLLECTOR_KEY are set. On its own it turns each finished request into a
record (no dims but the server's defaults); with serving.middleware in the server the
counts join the request the middleware saw.

The interface is marked unstable by vLLM: this plugin is tested against vllm 0.32.
"""

from __future__ import annotations

from typing import Any

from vllm.v1.metrics.loggers import StatLoggerBase

from serving import runtime
from serving.runtime import EngineCounts


def counts_from_finished(finished: Any, model: str) -> EngineCounts:
    return EngineCounts(
        request_id=str(finished.request_id),
        model=model,
        prompt=int(finished.num_prompt_tokens),
        cached=int(finished.num_cached_tokens),
        completion=int(finished.num_generation_tokens),
        finish_reason=str(finished.finish_reason),
        preemptions=int(finished.num_preemptions),
        queued_s=finished.queued_time,
        prefill_s=finished.prefill_time,
        decode_s=finished.decode_time,
        e2e_s=finished.e2e_latency,
    )


def served_model_name(vllm_config: Any) -> str:
    names = getattr(vllm_config.model_config, "served_model_name", None)
    if isinstance(names, list | tuple):
        names = names[0] if names else None
    return str(names or vllm_config.model_config.model)


class CostplatformStatLogger(StatLoggerBase):
    def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
        self.model = served_model_name(vllm_config)
        self.engine_index = engine_index
        self.runtime = runtime.get()
        if self.runtime is not None:
            self.runtime.served_model = self.model
            self.runtime.emitter.served_model = self.model

    def record(
        self,
        scheduler_stats: Any,
        iteration_stats: Any,
        mm_cache_stats: Any = None,
        engine_idx: int = 0,
    ) -> None:
        if self.runtime is None or iteration_stats is None:
            return
        for finished in iteration_stats.finished_requests:
            self.runtime.join.report(counts_from_finished(finished, self.model))

    def log_engine_initialized(self) -> None:
        pass
