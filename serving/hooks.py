"""Two engine hooks for what vLLM's per-request stats leave out.

1. A request the client abandons (or that times out) is aborted: vLLM drops its state
   and no FinishedRequestStats is made, yet its prompt was computed and some tokens were
   generated (they are in vllm:generation_tokens_total). The hook reads the request's
   state just before the output processor drops it.
2. Speculative-decoding counts per request (draft proposed, accepted) live on the same
   state when the request finishes.

Both wrap methods of vllm.v1.engine.output_processor.OutputProcessor, an internal class:
the version is pinned and tests/serving run against the real engine.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from serving.runtime import EngineCounts, Join

log = logging.getLogger("costplatform.serving")
_installed: list[Join] = []


def snapshot(state: Any, model: str) -> EngineCounts:
    stats = state.stats
    prefilled = not state.is_prefilling
    return EngineCounts(
        request_id=str(state.external_req_id),
        model=model,
        # Until its first output the prompt was not (fully) computed: vLLM counts it only then.
        prompt=int(state.prompt_len or 0) if prefilled else 0,
        cached=int(state.num_cached_tokens or 0) if prefilled else 0,
        completion=int(stats.num_generation_tokens) if stats is not None else 0,
        finish_reason="abort",
        preemptions=int(stats.num_preemptions) if stats is not None else 0,
        aborted=True,
    )


def _spec_counts(state: Any) -> tuple[int, int] | None:
    metrics = getattr(state, "spec_decode_metrics", None)
    if metrics is None:
        return None
    accepted = sum(j * count for j, count in enumerate(metrics.histogram))
    return int(metrics.num_draft_tokens), int(accepted)


def install(join: Join, model_of: Any) -> None:
    """Wrap the output processor once per process; `model_of(state)` names the model."""
    if _installed:
        _installed[0] = join
        return
    _installed.append(join)
    from vllm.v1.engine.output_processor import OutputProcessor

    original_abort = OutputProcessor.abort_requests
    original_finished = OutputProcessor._update_stats_from_finished

    def abort_requests(self: Any, request_ids: Iterable[str], internal: bool) -> list[str]:
        request_ids = list(request_ids)
        states = []
        try:
            for request_id in request_ids:
                if internal:
                    state = self.request_states.get(request_id)
                    states.extend([state] if state is not None else [])
                else:
                    for internal_id in self.external_req_ids.get(request_id, []):
                        state = self.request_states.get(internal_id)
                        states.extend([state] if state is not None else [])
            counts = [snapshot(state, model_of(state)) for state in states if state.stats is not None]
        except Exception:  # never let accounting break the engine
            log.exception("abort snapshot failed")
            counts = []
        result = original_abort(self, request_ids, internal)
        for item in counts:
            _installed[0].report(item)
        return result

    def update_stats_from_finished(self: Any, req_state: Any, finish_reason: Any, iteration_stats: Any) -> None:
        try:
            spec = _spec_counts(req_state)
            if spec is not None:
                _installed[0].spec_decode(str(req_state.external_req_id), *spec)
        except Exception:
            log.exception("speculative-decoding counts not read")
        original_finished(self, req_state, finish_reason, iteration_stats)

    OutputProcessor.abort_requests = abort_requests  # type: ignore[method-assign]
    OutputProcessor._update_stats_from_finished = update_stats_from_finished  # type: ignore[method-assign]
