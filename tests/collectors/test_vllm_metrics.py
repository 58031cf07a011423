"""collectors/vllm_metrics.py: the /metrics page read, the reconciliation of vLLM's counters
against the tokens the server accounted, and the records that reach the platform."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from prometheus_client import CollectorRegistry

from collectors.vllm_metrics import (
    ACCOUNTED,
    MAX_RECORD_ID,
    SUMMED,
    Counts,
    Reconciler,
    main,
    parse_metrics,
    reconcile_model,
    record_id,
)

MODEL = "qwen2.5-7b-instruct"
SERIES = {key: name for name, key in SUMMED.items()}  # the page's series of each field
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

# The shape of a real vLLM 0.32 page (PrometheusStatLogger: labels model_name and engine,
# counters with _total and _created, a data-parallel server has one engine label per engine).
REAL_PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 1.0
vllm:num_requests_running{engine="1",model_name="qwen"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 0.0
vllm:num_requests_waiting{engine="1",model_name="qwen"} 4.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="qwen"} 0.75
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="qwen"} 3.0
vllm:num_preemptions_total{engine="1",model_name="qwen"} 0.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="qwen"} 1200.0
vllm:prompt_tokens_total{engine="1",model_name="qwen"} 800.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="qwen"} 1.7400000e+09
vllm:prompt_tokens_created{engine="1",model_name="qwen"} 1.7400001e+09
# HELP vllm:prompt_tokens_cached_total Number of cached prompt tokens (local + external).
# TYPE vllm:prompt_tokens_cached_total counter
vllm:prompt_tokens_cached_total{engine="0",model_name="qwen"} 512.0
vllm:prompt_tokens_cached_total{engine="1",model_name="qwen"} 0.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="qwen"} 300.0
vllm:generation_tokens_total{engine="1",model_name="qwen"} 100.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="qwen"} 7.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="qwen"} 2.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="qwen"} 1.0
vllm:request_success_total{engine="1",finished_reason="abort",model_name="qwen"} 0.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="qwen"} 90.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="qwen"} 60.0
# HELP costplatform_serving_accounted_prompt_tokens_total Prompt tokens put into records.
# TYPE costplatform_serving_accounted_prompt_tokens_total counter
costplatform_serving_accounted_prompt_tokens_total{model_name="qwen"} 1900.0
# HELP costplatform_serving_accounted_generation_tokens_total Generation tokens put into records.
# TYPE costplatform_serving_accounted_generation_tokens_total counter
costplatform_serving_accounted_generation_tokens_total{model_name="qwen"} 350.0
# HELP costplatform_serving_accounted_cached_tokens_total Cached prompt tokens put into records.
# TYPE costplatform_serving_accounted_cached_tokens_total counter
costplatform_serving_accounted_cached_tokens_total{model_name="qwen"} 512.0
# HELP costplatform_serving_accounted_draft_tokens_total Speculative draft tokens put into records.
# TYPE costplatform_serving_accounted_draft_tokens_total counter
costplatform_serving_accounted_draft_tokens_total{model_name="qwen"} 75.0
# HELP costplatform_serving_accounted_draft_accepted_tokens_total Accepted draft tokens put into records.
# TYPE costplatform_serving_accounted_draft_accepted_tokens_total counter
costplatform_serving_accounted_draft_accepted_tokens_total{model_name="qwen"} 50.0
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
"""


def page(
    models: dict[str, dict[str, Any]] | None = None,
    *,
    prompt: int = 0,
    generation: int = 0,
    cached: int = 0,
    running: int = 0,
    waiting: int = 0,
    accounted: tuple[int, ...] | None = (0, 0, 0),
    created: float = 1_740_000_000.0,
    draft: int = 0,
    accepted: int = 0,
) -> str:
    """A vLLM-like page, two engines; one model (MODEL) from the keywords, or several. `accounted`:
    the server's prompt, generation and cached tokens, then its draft and accepted tokens if given;
    vLLM's speculative-decoding counters are on the page when `draft` is given."""
    if models is None:
        models = {MODEL: dict(prompt=prompt, generation=generation, cached=cached, running=running,
                              waiting=waiting, accounted=accounted, created=created, draft=draft,
                              accepted=accepted)}  # fmt: skip
    lines = []
    for name, m in models.items():
        for series, value in [("vllm:prompt_tokens_total", m["prompt"]), ("vllm:generation_tokens_total",
                              m["generation"]), ("vllm:prompt_tokens_cached_total", m["cached"]),
                              ("vllm:num_requests_running", m["running"]), ("vllm:num_requests_waiting",
                              m["waiting"])]:  # fmt: skip
            half = value // 2
            lines.append(f'{series}{{engine="0",model_name="{name}"}} {float(value - half)}')
            lines.append(f'{series}{{engine="1",model_name="{name}"}} {float(half)}')
        lines.append(f'vllm:prompt_tokens_created{{engine="0",model_name="{name}"}} {m.get("created", 1.0)}')
        if m.get("draft"):
            lines.append(f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="{name}"}} {m["draft"]}.0')
            lines.append(f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="{name}"}} '
                         f'{m["accepted"]}.0')  # fmt: skip
        if m.get("accounted") is not None:
            for key, value in zip(ACCOUNTED, m["accounted"], strict=False):
                lines.append(f'{SERIES[key]}{{model_name="{name}"}} {value}.0')
    return "\n".join(lines) + "\n"


class Taken:
    """A sink that keeps what it is handed (the seam the Pipeline fills in the end-to-end test)."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.fail = 0
        self.refuse = 0

    def submit_durable(self, records: Sequence[dict]) -> int:
        if self.fail:
            self.fail -= 1
            raise OSError("spool disk gone")
        if self.refuse:
            self.refuse -= 1
            return 0
        self.records.extend(json.loads(json.dumps(records)))
        return len(records)


def reconciler(tmp_path: Path, sink: Taken | None = None, **kwargs: Any) -> Reconciler:
    kwargs.setdefault("settle", 1)
    return Reconciler(source="gpu-1", sink=sink or Taken(), state_path=tmp_path / "state.json",
                      registry=CollectorRegistry(), **kwargs)  # fmt: skip


def tokens(record: dict) -> tuple[int, int, int]:
    t = record["tokens"]
    return t["prompt"], t["completion"], t.get("prompt_cached", 0)


# --- the page ---------------------------------------------------------------------------------


def test_it_sums_each_series_over_engines_per_model():
    series = parse_metrics(REAL_PAGE)["qwen"]

    assert series.vllm == Counts(2000, 400, 512, 90, 60)
    assert series.accounted == Counts(1900, 350, 512, 75, 50)
    assert (series.values["running"], series.values["waiting"], series.values["preemptions"]) == (3, 4, 3)
    assert series.success == {"stop": 9, "length": 1, "abort": 0}
    assert series.kv_cache_usage == [0.25, 0.75]
    assert (series.values["spec_draft_tokens"], series.values["spec_accepted_tokens"]) == (90, 60)
    assert series.created == 1.7400001e09
    assert not series.quiescent


def test_it_keeps_models_apart_and_ignores_unlabelled_series():
    models = parse_metrics(page({"a": dict(prompt=10, generation=2, cached=0, running=0, waiting=0, accounted=None),
                                 "b": dict(prompt=7, generation=1, cached=0, running=1, waiting=0,
                                           accounted=(7, 1, 0))}) + "process_cpu_seconds_total 1.0\n")  # fmt: skip

    assert set(models) == {"a", "b"}
    assert (models["a"].vllm, models["a"].has_accounted, models["a"].quiescent) == (Counts(10, 2, 0), False, True)
    assert (models["b"].accounted, models["b"].quiescent) == (Counts(7, 1, 0), False)
    assert "spec_draft_tokens" not in models["a"].values


def test_a_page_without_the_running_gauge_is_never_quiescent():
    text = 'vllm:prompt_tokens_total{engine="0",model_name="m"} 5.0\n'

    assert not parse_metrics(text)["m"].quiescent


def test_a_broken_page_is_an_error():
    with pytest.raises(ValueError):
        parse_metrics('vllm:prompt_tokens_total{model_name="m" 5\n')


# --- reconciliation ---------------------------------------------------------------------------


def test_the_first_quiescent_scrape_only_sets_the_baseline(tmp_path):
    rec = reconciler(tmp_path)

    assert rec.step(page(prompt=1000, generation=100, accounted=(0, 0, 0)), now=T0) == []
    assert rec.step(page(prompt=1000, generation=100, accounted=(0, 0, 0)), now=T0) == []
    [record] = rec.step(page(prompt=1300, generation=150, accounted=(200, 20, 0)), now=T0)

    assert tokens(record) == (100, 30, 0)


def test_from_zero_claims_the_whole_counters(tmp_path):
    rec = reconciler(tmp_path, from_zero=True)

    [record] = rec.step(page(prompt=1000, generation=100, cached=256, accounted=(600, 80, 128)), now=T0)

    assert tokens(record) == (400, 20, 128)
    assert record["ts"] == T0.isoformat()
    assert record["model"] == MODEL
    assert record["outcome"] == {"status": "ok"}
    assert record["dims"] == {"costplatform.kind": "reconciliation", "source": "gpu-1"}
    assert record["record_id"] == f"recon-gpu-1-{MODEL}-e0-1000-100-256"


@pytest.mark.parametrize("busy", [{"running": 1}, {"waiting": 2}])
def test_it_does_not_reconcile_while_requests_run_or_wait(tmp_path, busy):
    rec = reconciler(tmp_path, from_zero=True)

    assert rec.step(page(prompt=1000, generation=100, **busy), now=T0) == []
    [record] = rec.step(page(prompt=1000, generation=100), now=T0)

    assert tokens(record) == (1000, 100, 0)


def test_with_settle_2_it_waits_for_two_quiescent_scrapes_with_the_same_counters(tmp_path):
    rec = reconciler(tmp_path, from_zero=True, settle=2)

    assert rec.step(page(prompt=500, generation=50, accounted=(300, 30, 0)), now=T0) == []
    # The server's record of the last request landed after vLLM's counters moved: no gap after all.
    assert rec.step(page(prompt=500, generation=50, accounted=(500, 50, 0)), now=T0) == []
    assert rec.step(page(prompt=500, generation=50, accounted=(500, 50, 0)), now=T0) == []
    assert rec.step(page(prompt=900, generation=90, accounted=(500, 50, 0)), now=T0) == []
    [record] = rec.step(page(prompt=900, generation=90, accounted=(500, 50, 0)), now=T0)

    assert tokens(record) == (400, 40, 0)


def test_a_gap_is_emitted_once_and_only_its_growth_later(tmp_path):
    rec = reconciler(tmp_path, from_zero=True)

    first = rec.step(page(prompt=100, generation=10), now=T0)
    again = rec.step(page(prompt=100, generation=10), now=T0 + timedelta(seconds=15))
    later = rec.step(page(prompt=150, generation=30, accounted=(20, 5, 0)), now=T0 + timedelta(seconds=30))

    assert [tokens(r) for r in first] == [(100, 10, 0)]
    assert again == []
    assert [tokens(r) for r in later] == [(30, 15, 0)]
    assert rec.metrics.unattributed.labels(MODEL, "prompt")._value.get() == 130


def test_negative_parts_are_clamped_to_zero_and_logged(tmp_path, caplog):
    rec = reconciler(tmp_path, from_zero=True)

    with caplog.at_level(logging.WARNING, logger="collectors.vllm_metrics"):
        [record] = rec.step(page(prompt=100, generation=10, accounted=(120, 4, 0)), now=T0)

    assert tokens(record) == (0, 6, 0)
    assert "accounted more tokens than vLLM counted" in caplog.text
    assert "'prompt': -20" in caplog.text


def test_cached_tokens_are_at_most_the_prompt_gap_and_the_rest_comes_later(tmp_path):
    state, gap = reconcile_model(None, parse_metrics(page(prompt=10, generation=1, cached=64))[MODEL], model=MODEL,
                                 settle=1, from_zero=True)  # fmt: skip
    assert gap == Counts(10, 1, 10)

    _, later = reconcile_model(state, parse_metrics(page(prompt=200, generation=1, cached=64))[MODEL], model=MODEL,
                               settle=1)  # fmt: skip
    assert later == Counts(190, 0, 54)


def test_drafts_no_record_carries_are_reconciled_and_those_in_records_never(tmp_path):
    # 60 drafts proposed, 30 accepted; the records carry 45 and 25 of them (the engine's per-request
    # figures), an aborted request's 15 and 5 are in vLLM's counters alone.
    rec = reconciler(tmp_path, from_zero=True)

    [record] = rec.step(page(prompt=100, generation=40, draft=60, accepted=30, accounted=(100, 40, 0, 45, 25)), now=T0)
    again = rec.step(page(prompt=100, generation=40, draft=60, accepted=30, accounted=(100, 40, 0, 45, 25)), now=T0)
    # More requests, every draft of them in their records: nothing to reconcile.
    later = rec.step(page(prompt=180, generation=90, draft=160, accepted=70, accounted=(180, 90, 0, 145, 65)), now=T0)

    assert record["tokens"] == {"prompt": 0, "completion": 0, "draft": 15, "draft_accepted": 5}
    assert record["record_id"] == f"recon-gpu-1-{MODEL}-e0-100-40-0-d60-30"
    assert again == later == []
    assert rec.metrics.unattributed.labels(MODEL, "draft")._value.get() == 15


def test_accepted_drafts_are_at_most_the_drafts_reconciled(tmp_path):
    # The server accounted fewer accepted drafts than it should have (it never does): no record
    # says more drafts were accepted than proposed.
    series = parse_metrics(page(prompt=10, generation=5, draft=20, accepted=12, accounted=(10, 5, 0, 15, 2)))[MODEL]

    _, gap = reconcile_model(None, series, model=MODEL, settle=1, from_zero=True)

    assert gap == Counts(0, 0, 0, 5, 5)


def test_a_state_file_written_before_drafts_were_reconciled_still_loads(tmp_path):
    counts = {"base": [10, 5, 0], "base_accounted": [10, 5, 0], "emitted": [1, 1, 0], "last": [10, 5, 0]}
    old = {MODEL: {"epoch": 2, **counts, "last_accounted": [9, 4, 0], "created": None, "steady": 3}}
    (tmp_path / "state.json").write_text(json.dumps({"version": 1, "pending": [], "models": old}))

    state = reconciler(tmp_path).state.models[MODEL]

    assert (state.epoch, state.base, state.emitted) == (2, Counts(10, 5, 0, 0, 0), Counts(1, 1, 0, 0, 0))


def test_a_counter_going_down_rebaselines_at_zero_in_a_new_epoch(tmp_path, caplog):
    rec = reconciler(tmp_path, from_zero=True)
    assert [tokens(r) for r in rec.step(page(prompt=5000, generation=500, accounted=(4000, 500, 0)), now=T0)] == [
        (1000, 0, 0)
    ]

    with caplog.at_level(logging.WARNING, logger="collectors.vllm_metrics"):
        [record] = rec.step(page(prompt=300, generation=40, accounted=(100, 40, 0)), now=T0)

    assert tokens(record) == (200, 0, 0)
    assert record["record_id"] == f"recon-gpu-1-{MODEL}-e1-300-40-0"
    assert "went down (restart)" in caplog.text
    assert rec.metrics.resets.labels(MODEL)._value.get() == 1


def test_a_new_counter_creation_time_is_a_restart_even_when_counters_grew(tmp_path):
    rec = reconciler(tmp_path, from_zero=True)
    rec.step(page(prompt=100, generation=10, accounted=(50, 10, 0), created=1.0e9), now=T0)

    [record] = rec.step(page(prompt=400, generation=20, accounted=(300, 20, 0), created=2.0e9), now=T0)

    assert tokens(record) == (100, 0, 0)  # all since the restart, not less the 50 emitted before it


def test_a_restarted_reconciler_does_not_emit_again(tmp_path):
    sink = Taken()
    reconciler(tmp_path, sink, from_zero=True).step(page(prompt=100, generation=10), now=T0)

    restarted = reconciler(tmp_path, sink, from_zero=True)
    assert restarted.step(page(prompt=100, generation=10), now=T0 + timedelta(minutes=1)) == []
    restarted.step(page(prompt=120, generation=10), now=T0 + timedelta(minutes=2))

    assert [tokens(r) for r in sink.records] == [(100, 10, 0), (20, 0, 0)]


def test_records_not_taken_before_a_crash_are_handed_over_unchanged_after_restart(tmp_path):
    sink = Taken()
    sink.fail = 1
    with pytest.raises(OSError):
        reconciler(tmp_path, sink, from_zero=True).step(page(prompt=100, generation=10), now=T0)
    assert sink.records == []

    restarted = reconciler(tmp_path, sink, from_zero=True)
    restarted.step(page(prompt=100, generation=10), now=T0 + timedelta(minutes=5))

    [record] = sink.records
    assert (record["ts"], tokens(record)) == (T0.isoformat(), (100, 10, 0))
    assert json.loads((tmp_path / "state.json").read_text())["pending"] == []


def test_record_ids_are_deterministic_and_never_too_long():
    short = record_id(source="gpu-1", model="m", epoch=0, vllm=Counts(1, 2, 3))
    long = record_id(source="s" * 100, model="m" * 200, epoch=3, vllm=Counts(10**12, 10**12, 0))

    assert short == record_id(source="gpu-1", model="m", epoch=0, vllm=Counts(1, 2, 3)) == "recon-gpu-1-m-e0-1-2-3"
    assert record_id(source="gpu-1", model="m", epoch=0, vllm=Counts(1, 2, 3, 9, 4)) == "recon-gpu-1-m-e0-1-2-3-d9-4"
    assert len(long) == MAX_RECORD_ID
    assert long != record_id(source="s" * 100, model="m" * 200, epoch=4, vllm=Counts(10**12, 10**12, 0))


def test_it_reexports_the_series_as_gauges(tmp_path):
    registry = CollectorRegistry()
    rec = Reconciler(source="gpu-1", sink=Taken(), registry=registry, settle=1)

    rec.step(REAL_PAGE)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"model_name": "qwen", **labels})

    assert value("costplatform_vllm_requests_running") == 3
    assert value("costplatform_vllm_requests_waiting") == 4
    assert value("costplatform_vllm_kv_cache_usage_ratio") == 0.5
    assert value("costplatform_vllm_preemptions") == 3
    assert value("costplatform_vllm_prompt_tokens") == 2000
    assert value("costplatform_vllm_generation_tokens") == 400
    assert value("costplatform_vllm_prompt_tokens_cached") == 512
    assert value("costplatform_vllm_requests_succeeded", finished_reason="stop") == 9
    assert value("costplatform_vllm_spec_decode_accepted_tokens") == 60
    assert value("costplatform_vllm_spec_decode_drafts") is None


# --- over HTTP --------------------------------------------------------------------------------


class MetricsServer:
    """A loopback HTTP server answering /metrics with `text` (or `status` when it is not 200)."""

    def __init__(self) -> None:
        self.text, self.status = "", 200
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = outer.text.encode() if outer.status == 200 else b"down"
                self.send_response(outer.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def vllm() -> Iterator[MetricsServer]:
    server = MetricsServer()
    yield server
    server.close()


def test_it_scrapes_over_http_and_counts_failed_scrapes(tmp_path, vllm):
    sink = Taken()
    rec = reconciler(tmp_path, sink, from_zero=True)
    vllm.status = 503

    assert rec.scrape(vllm.url) is None
    vllm.status, vllm.text = 200, page(prompt=64, generation=8, accounted=(32, 8, 0))
    assert [tokens(r) for r in rec.scrape(vllm.url) or []] == [(32, 0, 0)]

    assert rec.metrics.scrape_errors._value.get() == 1
    assert rec.metrics.up._value.get() == 1


def test_once_scrapes_until_the_model_settles(tmp_path, vllm):
    rec = reconciler(tmp_path, settle=2, from_zero=True)
    vllm.text = page(prompt=64, generation=8, running=1)
    stop = threading.Event()

    assert rec.run(vllm.url, interval=0.01, stop=stop, once=True, max_scrapes=3) is False
    vllm.text = page(prompt=64, generation=8)
    assert rec.run(vllm.url, interval=0.01, stop=stop, once=True, max_scrapes=5) is True
    assert [tokens(r) for r in rec.sink.records] == [(64, 8, 0)]  # type: ignore[attr-defined]


def test_records_the_spool_refused_stay_pending_and_go_with_a_later_scrape(tmp_path, vllm, caplog):
    sink = Taken()
    sink.refuse = 1
    rec = reconciler(tmp_path, sink, from_zero=True)
    vllm.text = page(prompt=64, generation=8)

    with caplog.at_level(logging.ERROR, logger="collectors.vllm_metrics"):
        assert rec.scrape(vllm.url) is None
    pending = json.loads((tmp_path / "state.json").read_text())["pending"]
    assert rec.scrape(vllm.url) == []

    assert "kept in the state file" in caplog.text
    assert [tokens(r) for r in pending] == [(64, 8, 0)]
    assert sink.records == pending


def test_it_warns_once_when_the_page_has_no_accounted_series(tmp_path, caplog):
    rec = reconciler(tmp_path)

    with caplog.at_level(logging.WARNING, logger="collectors.vllm_metrics"):
        rec.step(page(accounted=None))
        rec.step(page(prompt=10, generation=1, accounted=None))
        rec.step(page(prompt=20, generation=1, accounted=None))

    assert caplog.text.count("is the server instrumented?") == 1


def test_help_exits_zero():
    done = subprocess.run([sys.executable, "-m", "collectors.vllm_metrics", "--help"], capture_output=True, text=True,
                          check=False)  # fmt: skip

    assert done.returncode == 0
    assert "--platform-url" in done.stdout


# --- into a real costplatform -----------------------------------------------------------------


@pytest.mark.usefixtures("truncate_records")
def test_reconciliation_records_reach_the_platform_as_shadow_unattributed(tmp_path, vllm, live_server, client):
    from django.contrib.auth.models import Group, User

    from apps.ingest.models import Record
    from tests.factories import active_ruleset, collector_key

    active_ruleset()
    key = collector_key("vllm-gpu-1", reconciliation=True, backfill=True).secret  # T0 is in 2025
    state = tmp_path / "recon.json"
    args = ["--url", vllm.url, "--spool", str(tmp_path / "spool"), "--platform-url", live_server.url, "--key", key,
            "--source", "gpu-1", "--state", str(state), "--interval", "0.01", "--once"]  # fmt: skip
    vllm.text = page(prompt=1000, generation=100, accounted=(1000, 100, 0))
    assert main(args, stop=threading.Event()) == 0  # the baseline
    # 50 drafts proposed, 20 accepted; the records carry 30 and 12: the other 20 drafts, 12 of
    # them rejected, belong to requests without per-request figures.
    vllm.text = page(prompt=1600, generation=180, cached=256, draft=50, accepted=20, accounted=(1200, 120, 128, 30, 12))

    assert main(args, stop=threading.Event()) == 0
    assert main(args, stop=threading.Event()) == 0  # settled again, nothing new

    [stored] = Record.objects.all()
    assert stored.record_id == f"recon-gpu-1-{MODEL}-e0-1600-180-256-d50-20"
    assert (stored.draft, stored.draft_accepted) == (20, 8)
    viewer = User.objects.create_user("r", password="pw-for-tests-only")
    viewer.groups.add(Group.objects.get_or_create(name="viewer")[0])  # reading an API needs a role
    client.force_login(viewer)
    start = datetime.now(UTC) - timedelta(hours=1)
    query = urlencode({"from": start.isoformat(), "to": (start + timedelta(hours=2)).isoformat(),
                       "group_by": "reason,model"})  # fmt: skip
    rows = client.get(f"/api/v1/usage/classes?{query}").json()["rows"]
    assert {(r["reason"], r["model"]): r["tokens"] for r in rows} == {("shadow.unattributed", MODEL): 400 + 60 + 12}
