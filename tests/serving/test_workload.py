"""devtools/workload.py: its phases, and a short run against the real instrumented vLLM whose
records reach the platform with the workload's attribution."""

from __future__ import annotations

import pytest

from devtools import workload
from tests.processes import PlatformServer, VllmServer


def test_the_phases_cover_the_run_in_order() -> None:
    assert [workload.phase_at(share) for share in (0, 0.39, 0.4, 0.59, 0.7, 0.8, 0.95, 1.0)] == [
        "steady", "steady", "retry storm", "retry storm", "steady", "campaign", "steady", "steady",
    ]  # fmt: skip
    assert workload.phase_span("campaign") == (0.75, 0.9)
    for phase in ("steady", "retry storm", "campaign"):
        assert workload.MIX[phase], phase


@pytest.mark.slow
def test_a_short_run_reaches_the_platform_attributed(vllm_server: VllmServer, platform: PlatformServer) -> None:
    lines = []
    stats = workload.run(vllm_server.url, seconds=12, concurrency=3, progress=lines.append, every=5)
    sent = sum(stats.requests.values())
    assert sent >= 20 and lines, stats.line()
    assert stats.outcomes["stop"] > 0, stats.line()  # stop_token_ids end answers before max_tokens
    assert not [o for o in stats.outcomes if o.startswith("failed")], stats.line()
    batch = stats.requests["forgotten batch job"]
    finished = sent - batch - stats.outcomes["aborted by the client"]
    demo = platform.wait_records(finished, **{"dims.env": "demo"})
    staging = platform.wait_records(batch, **{"dims.env": "staging"})
    assert {r["dims"]["business_line"] for r in staging} == {"data-platform"}
    assert {"customer-service", "search"} <= {r["dims"]["business_line"] for r in demo}
    agent = [r for r in demo if r["dims"].get("feature") == "agent"]
    assert agent and all(r["dims"]["conversation_id"] and r["dims"]["step"] for r in agent)
    assert {r["outcome"]["finish_reason"] for r in demo} >= {"stop"}
