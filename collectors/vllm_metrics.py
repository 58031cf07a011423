"""Scrape a vLLM /metrics page, re-export what the platform watches, and reconcile tokens.

    python -m collectors.vllm_metrics --url http://host:8000/metrics --spool DIR \\
        --platform-url URL --key KEY [--interval 15] [--source NAME] [--metrics-port N] [--once]

Every `interval` seconds the page is read and, per `model_name` (summed over vLLM's `engine`
label), the series the platform needs are kept and re-exported as `costplatform_vllm_*` gauges.

Reconciliation: the instrumented server (serving/) exports on the same page the tokens it has put
into records (`costplatform_serving_accounted_{prompt,generation,cached,draft,draft_accepted}_tokens_total`).
The gap vLLM counter - accounted counter is what no record carries (client aborts, a request the
middleware missed); for speculative decoding (`vllm:spec_decode_num_{draft,accepted}_tokens_total`)
it is the drafts of the requests whose record has no per-request figures, so a draft is counted
once, in its request's record or here. The gap is measured only at a *settled* scrape: nothing
running or waiting for the model, and the counters unchanged since the previous scrape (`settle`
quiescent scrapes in a row), so that tokens of requests in flight, or of records still being
built, are not taken for a gap.
The growth of the gap since the last reconciliation becomes one record per model, which the
platform classifies as shadow.unattributed (its dims carry costplatform.kind=reconciliation).

The first settled scrape sets the baseline (earlier tokens are not claimed) unless `from_zero`.
A counter that goes down (or a new counter creation time) means vLLM restarted: the model is
re-baselined at zero under a new epoch. The state (baselines, what was emitted, and records about
to be handed over) is kept in a small JSON file, written atomically before a record is handed to
the shipper, so a restarted reconciler neither re-emits nor loses a gap; a record handed over
twice keeps its record_id and ts, so the platform stores it once.

Standard library and prometheus_client only; records go through wire.shipper.Pipeline.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from wire.contract import MAX_RECORD_ID, RECONCILIATION_DIM, RECONCILIATION_VALUE
from wire.keys import collector_key, collector_key_arguments
from wire.record import make_record

log = logging.getLogger(__name__)

RECONCILIATION_DIMS = {RECONCILIATION_DIM: RECONCILIATION_VALUE}
DEFAULT_INTERVAL = 15.0
DEFAULT_SETTLE = 2
STATE_VERSION = 1

# Sample name on the page -> field of ModelSeries; each summed over the engine label.
SUMMED = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:num_preemptions_total": "preemptions",
    "vllm:prompt_tokens_total": "prompt",
    "vllm:generation_tokens_total": "generation",
    "vllm:prompt_tokens_cached_total": "cached",
    "vllm:spec_decode_num_drafts_total": "spec_drafts",
    "vllm:spec_decode_num_draft_tokens_total": "spec_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "spec_accepted_tokens",
    "costplatform_serving_accounted_prompt_tokens_total": "accounted_prompt",
    "costplatform_serving_accounted_generation_tokens_total": "accounted_generation",
    "costplatform_serving_accounted_cached_tokens_total": "accounted_cached",
    "costplatform_serving_accounted_draft_tokens_total": "accounted_draft",
    "costplatform_serving_accounted_draft_accepted_tokens_total": "accounted_draft_accepted",
}
SUCCESS = "vllm:request_success_total"
KV_CACHE = "vllm:kv_cache_usage_perc"
# A counter's creation time changes when vLLM restarts (absent in multiprocess mode).
CREATED = ("vllm:prompt_tokens_created", "vllm:generation_tokens_created")
VLLM = ("prompt", "generation", "cached", "spec_draft_tokens", "spec_accepted_tokens")
ACCOUNTED = ("accounted_prompt", "accounted_generation", "accounted_cached", "accounted_draft",
             "accounted_draft_accepted")  # fmt: skip

# Re-exported gauges: field -> (name, help).
EXPORTED = {
    "running": ("costplatform_vllm_requests_running", "Requests running in vLLM (sum over engines)."),
    "waiting": ("costplatform_vllm_requests_waiting", "Requests waiting in vLLM (sum over engines)."),
    "preemptions": ("costplatform_vllm_preemptions", "vLLM's preemption counter, as last scraped."),
    "prompt": ("costplatform_vllm_prompt_tokens", "vLLM's prompt token counter, as last scraped."),
    "generation": ("costplatform_vllm_generation_tokens", "vLLM's generation token counter, as last scraped."),
    "cached": ("costplatform_vllm_prompt_tokens_cached", "vLLM's cached prompt token counter, as last scraped."),
    "spec_drafts": ("costplatform_vllm_spec_decode_drafts", "vLLM's speculative drafts counter."),
    "spec_draft_tokens": ("costplatform_vllm_spec_decode_draft_tokens", "vLLM's draft token counter."),
    "spec_accepted_tokens": ("costplatform_vllm_spec_decode_accepted_tokens", "vLLM's accepted draft token counter."),
}


class Counts(NamedTuple):
    """Token counts of one model: prompt (cached included), generation, cached prompt, and the
    speculative draft tokens proposed and accepted (accepted ones are part of generation)."""

    prompt: int = 0
    generation: int = 0
    cached: int = 0
    draft: int = 0
    draft_accepted: int = 0

    def minus(self, other: Counts) -> Counts:
        return Counts(*(a - b for a, b in zip(self, other, strict=True)))

    def plus(self, other: Counts) -> Counts:
        return Counts(*(a + b for a, b in zip(self, other, strict=True)))

    def below(self, other: Counts) -> bool:
        """True when any count is lower than the other's (a counter went down)."""
        return any(a < b for a, b in zip(self, other, strict=True))


ZERO = Counts()


@dataclass
class ModelSeries:
    """What one scrape says about one model (model_name), summed over engines."""

    values: dict[str, float] = field(default_factory=dict)
    success: dict[str, float] = field(default_factory=dict)  # finished_reason -> requests
    kv_cache_usage: list[float] = field(default_factory=list)  # one per engine
    created: float | None = None

    def count(self, name: str) -> int:
        return round(self.values.get(name, 0.0))

    @property
    def vllm(self) -> Counts:
        return Counts(*(self.count(name) for name in VLLM))

    @property
    def accounted(self) -> Counts:
        return Counts(*(self.count(name) for name in ACCOUNTED))

    @property
    def has_tokens(self) -> bool:
        return "prompt" in self.values or "generation" in self.values

    @property
    def has_accounted(self) -> bool:
        return any(name in self.values for name in ACCOUNTED)

    @property
    def quiescent(self) -> bool:
        """Nothing running or waiting; a page without those gauges is never taken as idle."""
        return self.values.get("running") == 0 and self.values.get("waiting") == 0


def parse_metrics(text: str) -> dict[str, ModelSeries]:
    """The series the platform needs from a Prometheus text page, per model_name.
    Raises ValueError when the page cannot be parsed."""
    models: dict[str, ModelSeries] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            model = sample.labels.get("model_name")
            if model is None:
                continue
            if sample.name in SUMMED:
                series = models.setdefault(model, ModelSeries())
                key = SUMMED[sample.name]
                series.values[key] = series.values.get(key, 0.0) + sample.value
            elif sample.name == SUCCESS:
                series = models.setdefault(model, ModelSeries())
                reason = sample.labels.get("finished_reason", "")
                series.success[reason] = series.success.get(reason, 0.0) + sample.value
            elif sample.name == KV_CACHE:
                models.setdefault(model, ModelSeries()).kv_cache_usage.append(sample.value)
            elif sample.name in CREATED:
                series = models.setdefault(model, ModelSeries())
                series.created = max(series.created or 0.0, sample.value)
    return models


# --- reconciliation, pure ---------------------------------------------------------------------


@dataclass(frozen=True)
class ModelState:
    """What the reconciler remembers of one model between scrapes (and restarts)."""

    epoch: int = 0  # vLLM restarts seen; part of the record ids
    base: Counts | None = None  # vLLM counters at the baseline; None until the first settled scrape
    base_accounted: Counts = ZERO
    emitted: Counts = ZERO  # gap already sent as records since the baseline
    last: Counts | None = None  # vLLM counters at the previous scrape
    last_accounted: Counts | None = None
    created: float | None = None
    steady: int = 0  # quiescent scrapes in a row with unchanged counters

    def gap(self, vllm: Counts, accounted: Counts) -> Counts:
        """Tokens vLLM counted and no record carries, since the baseline, not yet emitted."""
        base = self.base or ZERO
        return vllm.minus(base).minus(accounted.minus(self.base_accounted)).minus(self.emitted)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelState:
        def counts(value: Any) -> Counts | None:
            return None if value is None else Counts(*value)

        return cls(
            epoch=int(data.get("epoch", 0)),
            base=counts(data.get("base")),
            base_accounted=counts(data.get("base_accounted")) or ZERO,
            emitted=counts(data.get("emitted")) or ZERO,
            last=counts(data.get("last")),
            last_accounted=counts(data.get("last_accounted")),
            created=data.get("created"),
            steady=int(data.get("steady", 0)),
        )


def _restarted(prev: ModelState, series: ModelSeries) -> bool:
    if prev.last is not None and series.vllm.below(prev.last):
        return True
    if prev.last_accounted is not None and series.accounted.below(prev.last_accounted):
        return True
    return prev.created is not None and series.created is not None and series.created != prev.created


def reconcile_model(
    prev: ModelState | None, series: ModelSeries, *, model: str, settle: int = DEFAULT_SETTLE, from_zero: bool = False
) -> tuple[ModelState, Counts | None]:
    """The model's state after this scrape, and the tokens to emit as a reconciliation record
    (None when there is nothing to emit). Pure apart from logging."""
    vllm, accounted = series.vllm, series.accounted
    state = prev or ModelState(base=ZERO if from_zero else None)
    if prev is not None and _restarted(prev, series):
        lost = prev.gap(prev.last or ZERO, prev.last_accounted or ZERO) if prev.base is not None else ZERO
        log.warning("vLLM counters of %s went down (restart): re-baselined at zero; unreconciled gap lost: %s",
                    model, lost._asdict())  # fmt: skip
        state = ModelState(epoch=prev.epoch + 1, base=ZERO)
    unchanged = state.last == vllm and state.last_accounted == accounted
    steady = (state.steady + 1 if unchanged else 1) if series.quiescent else 0
    state = replace(state, last=vllm, last_accounted=accounted, created=series.created, steady=steady)
    if steady < settle:
        return state, None
    if state.base is None:
        return replace(state, base=vllm, base_accounted=accounted), None
    gap = state.gap(vllm, accounted)
    if any(part < 0 for part in gap) and steady == settle:
        log.warning("%s: the server accounted more tokens than vLLM counted (%s); clamped to 0",
                    model, {k: v for k, v in gap._asdict().items() if v < 0})  # fmt: skip
    prompt, generation, draft = max(gap.prompt, 0), max(gap.generation, 0), max(gap.draft, 0)
    emit = Counts(prompt, generation, min(max(gap.cached, 0), prompt), draft, min(max(gap.draft_accepted, 0), draft))
    if emit == ZERO:
        return state, None
    return replace(state, emitted=state.emitted.plus(emit)), emit


def record_id(*, source: str, model: str, epoch: int, vllm: Counts) -> str:
    """Deterministic: the same source, model, epoch and counters give the same id (the draft
    counters only where speculative decoding ran, so that other servers' ids stay as they were)."""
    text = f"recon-{source}-{model}-e{epoch}-{vllm.prompt}-{vllm.generation}-{vllm.cached}"
    if vllm.draft or vllm.draft_accepted:
        text += f"-d{vllm.draft}-{vllm.draft_accepted}"
    if len(text) <= MAX_RECORD_ID:
        return text
    digest = hashlib.blake2b(text.encode(), digest_size=12).hexdigest()
    return f"{text[: MAX_RECORD_ID - len(digest) - 1]}-{digest}"


def reconciliation_record(*, source: str, model: str, epoch: int, vllm: Counts, gap: Counts, ts: datetime) -> dict:
    return make_record(
        record_id=record_id(source=source, model=model, epoch=epoch, vllm=vllm),
        ts=ts,
        model=model,
        tokens={
            "prompt": gap.prompt,
            "completion": gap.generation,
            "prompt_cached": gap.cached,
            "draft": gap.draft,
            "draft_accepted": gap.draft_accepted,
        },
        status="ok",
        dims={**RECONCILIATION_DIMS, "source": source},
    )


# --- state file, sink, reconciler ------------------------------------------------------------


@dataclass
class State:
    models: dict[str, ModelState] = field(default_factory=dict)
    pending: list[dict] = field(default_factory=list)  # records written here before the sink took them

    def dumps(self) -> str:
        models = {name: state.to_json() for name, state in sorted(self.models.items())}
        return json.dumps({"version": STATE_VERSION, "models": models, "pending": self.pending}, sort_keys=True)

    @classmethod
    def load(cls, path: Path | None) -> State:
        if path is None or not path.exists():
            return cls()
        data = json.loads(path.read_text())
        models = {name: ModelState.from_json(value) for name, value in data.get("models", {}).items()}
        return cls(models=models, pending=list(data.get("pending", [])))

    def save(self, path: Path | None) -> None:
        """Atomically: a temporary file, fsync'd, renamed over the old one."""
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as handle:
            handle.write(self.dumps())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class NotTaken(RuntimeError):
    """The shipper did not take the records (spool full and refusing): they stay pending."""


class Sink(Protocol):
    """Where records go: wire.shipper.Pipeline (returns once they are durable)."""

    def submit_durable(self, records: Sequence[dict]) -> int: ...


class Reconciler:
    """Turns successive /metrics pages into reconciliation records handed to a sink, and keeps
    the latest page's series for the re-exported gauges."""

    def __init__(
        self,
        *,
        source: str,
        sink: Sink,
        state_path: Path | str | None = None,
        settle: int = DEFAULT_SETTLE,
        from_zero: bool = False,
        registry: CollectorRegistry | None = None,
    ) -> None:
        if settle < 1:
            raise ValueError("settle must be at least 1")
        self.source, self.sink, self.settle, self.from_zero = source, sink, settle, from_zero
        self.state_path = Path(state_path) if state_path is not None else None
        self.state = State.load(self.state_path)
        self.latest: dict[str, ModelSeries] = {}
        self._lock = threading.Lock()
        self._warned_unaccounted = False
        self.metrics = _Metrics(self, registry)

    def step(self, text: str, *, now: datetime | None = None) -> list[dict]:
        """Read one /metrics page; the reconciliation records it produced (handed to the sink)."""
        return self.observe(parse_metrics(text), now=now)

    def observe(self, models: dict[str, ModelSeries], *, now: datetime | None = None) -> list[dict]:
        self._hand_over_pending()
        now = now or datetime.now(UTC)
        records = []
        for model, series in models.items():
            if not series.has_tokens:
                continue
            self._warn_if_unaccounted(model, series)
            prev = self.state.models.get(model)
            state, gap = reconcile_model(prev, series, model=model, settle=self.settle, from_zero=self.from_zero)
            if gap is not None:
                records.append(reconciliation_record(source=self.source, model=model, epoch=state.epoch,
                                                     vllm=series.vllm, gap=gap, ts=now))  # fmt: skip
                self.metrics.emitted(model, gap)
            if prev is not None and state.epoch != prev.epoch:
                self.metrics.resets.labels(model).inc()
            self.state.models[model] = state
        with self._lock:
            self.latest = models
        self.state.pending = records
        self.state.save(self.state_path)
        self._hand_over_pending()
        return records

    def _hand_over_pending(self) -> None:
        """Give the sink the records saved as pending (by this step, or before a crash)."""
        if not self.state.pending:
            return
        taken = self.sink.submit_durable(self.state.pending)
        if taken < len(self.state.pending):
            raise NotTaken(f"the shipper took {taken} of {len(self.state.pending)} reconciliation records")
        log.info("handed %d reconciliation record(s) to the shipper", taken)
        self.state.pending = []
        self.state.save(self.state_path)

    def _warn_if_unaccounted(self, model: str, series: ModelSeries) -> None:
        if not series.has_accounted and series.vllm != ZERO and not self._warned_unaccounted:
            self._warned_unaccounted = True
            log.warning("no costplatform_serving_accounted_* series for %s on the page: every token vLLM counts "
                        "will be reported as unattributed (is the server instrumented?)", model)  # fmt: skip

    def scrape(self, url: str, *, timeout: float = 10.0) -> list[dict] | None:
        """Fetch and step; None when the page could not be read (logged and counted)."""
        try:
            models = parse_metrics(fetch(url, timeout=timeout))
        except (OSError, ValueError) as exc:
            self.metrics.scrape_errors.inc()
            self.metrics.up.set(0)
            log.warning("scrape of %s failed: %s", url, exc)
            return None
        self.metrics.up.set(1)
        self.metrics.last_scrape.set_to_current_time()
        try:
            return self.observe(models)
        except (NotTaken, OSError) as exc:
            log.error("reconciliation records kept in the state file, not yet in the spool: %s", exc)
            return None

    def settled(self) -> bool:
        """Every model seen has reached a settled scrape (used by --once)."""
        states = self.state.models.values()
        return bool(states) and all(s.steady >= self.settle and s.base is not None for s in states)

    def run(self, url: str, *, interval: float, stop: threading.Event, once: bool = False, timeout: float = 10.0,
            max_scrapes: int | None = None) -> bool:  # fmt: skip
        """Scrape every `interval` seconds until `stop` is set; with `once`, until every model
        has settled (True) or `max_scrapes` were made (False)."""
        scrapes = 0
        while not stop.is_set():
            self.scrape(url, timeout=timeout)
            scrapes += 1
            if once and self.settled():
                return True
            if max_scrapes is not None and scrapes >= max_scrapes:
                return not once
            stop.wait(interval)
        return not once


def fetch(url: str, *, timeout: float = 10.0) -> str:
    request = urllib.request.Request(url, headers={"Accept": "text/plain", "User-Agent": "costplatform-vllm-metrics/1"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        charset = response.headers.get_content_charset() or "utf-8"
        return response.read().decode(charset, errors="replace")


# --- metrics ----------------------------------------------------------------------------------


class _Metrics:
    def __init__(self, reconciler: Reconciler, registry: CollectorRegistry | None) -> None:
        kwargs: dict[str, Any] = {"registry": registry} if registry is not None else {}
        self.unattributed = Counter(
            "costplatform_vllm_unattributed_tokens", "Tokens emitted in reconciliation records (vLLM minus accounted).",
            ["model_name", "kind"], **kwargs,
        )  # fmt: skip
        self.resets = Counter("costplatform_vllm_counter_resets", "vLLM restarts seen (counters went down).",
                              ["model_name"], **kwargs)  # fmt: skip
        self.scrape_errors = Counter("costplatform_vllm_scrape_errors", "Scrapes that failed.", **kwargs)
        self.up = Gauge("costplatform_vllm_up", "1 when the last scrape worked.", **kwargs)
        self.last_scrape = Gauge("costplatform_vllm_last_scrape_timestamp_seconds", "Time of the last scrape.",
                                 **kwargs)  # fmt: skip
        (registry or _default_registry()).register(_SeriesCollector(reconciler))

    def emitted(self, model: str, gap: Counts) -> None:
        for kind, value in gap._asdict().items():
            self.unattributed.labels(model, kind).inc(value)


def _default_registry() -> CollectorRegistry:
    from prometheus_client import REGISTRY

    return REGISTRY


class _SeriesCollector(Collector):
    """The latest scrape's series as costplatform_vllm_* gauges (a model gone from the page is
    gone from these too), and the gap not yet reconciled."""

    def __init__(self, reconciler: Reconciler) -> None:
        self.reconciler = reconciler

    def collect(self) -> Iterator[Metric]:
        with self.reconciler._lock:
            latest = dict(self.reconciler.latest)
        yield from self._families(latest)

    def describe(self) -> Iterable[Metric]:
        return []

    def _families(self, latest: dict[str, ModelSeries]) -> Iterator[Metric]:
        for key, (name, help_text) in EXPORTED.items():
            family = GaugeMetricFamily(name, help_text, labels=["model_name"])
            for model, series in sorted(latest.items()):
                if key in series.values:
                    family.add_metric([model], series.values[key])
            yield family
        kv = GaugeMetricFamily("costplatform_vllm_kv_cache_usage_ratio", "KV cache use, 0..1 (mean over engines).",
                               labels=["model_name"])  # fmt: skip
        success = GaugeMetricFamily("costplatform_vllm_requests_succeeded", "vLLM's finished requests counter.",
                                    labels=["model_name", "finished_reason"])  # fmt: skip
        gap = GaugeMetricFamily("costplatform_vllm_unreconciled_tokens", "vLLM minus accounted tokens not yet "
                                "emitted (includes requests in flight).", labels=["model_name", "kind"])  # fmt: skip
        for model, series in sorted(latest.items()):
            if series.kv_cache_usage:
                kv.add_metric([model], sum(series.kv_cache_usage) / len(series.kv_cache_usage))
            for reason, value in sorted(series.success.items()):
                success.add_metric([model, reason], value)
            state = self.reconciler.state.models.get(model)
            if state is not None and state.base is not None:
                for kind, value in state.gap(series.vllm, series.accounted)._asdict().items():
                    gap.add_metric([model, kind], value)
        yield from (kv, success, gap)


# --- command line -----------------------------------------------------------------------------


def default_source(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or "vllm"


def default_state_path(spool: Path) -> Path:
    """Next to the spool directory, not in it (the spool owns its directory)."""
    return spool.with_name(spool.name + ".vllm-reconcile.json")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.vllm_metrics",
        description="Scrape a vLLM /metrics page, re-export its series and send reconciliation records "
        "(tokens vLLM counted that no record carries) to the platform.",
        epilog="Exit status: 0 on a clean stop (or --once settled), 1 when --once did not settle or "
        "records could not be flushed, 2 on bad arguments.",
    )
    parser.add_argument("--url", required=True, help="vLLM metrics URL, e.g. http://127.0.0.1:8000/metrics")
    parser.add_argument("--spool", required=True, type=Path, help="spool directory of the shipper")
    parser.add_argument("--platform-url", required=True, help="costplatform server URL, e.g. http://127.0.0.1:8000")
    collector_key_arguments(parser)
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="seconds between scrapes (15)")
    parser.add_argument("--source", help="name in the records' dims and ids (default: host:port of --url)")
    parser.add_argument("--state", type=Path, help="state file (default: <spool>.vllm-reconcile.json)")
    parser.add_argument("--settle", type=int, default=DEFAULT_SETTLE,
                        help="quiescent scrapes in a row with unchanged counters before reconciling (2)")  # fmt: skip
    parser.add_argument("--from-zero", action="store_true", help="claim the counters from zero at the first scrape")
    parser.add_argument("--metrics-port", type=int, help="serve this collector's metrics on this port")
    parser.add_argument("--once", action="store_true", help="scrape until every model settled, ship, exit")
    parser.add_argument("--max-scrapes", type=int, default=40, help="with --once: give up after this many (40)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds for one scrape (10)")
    return parser


def main(argv: list[str] | None = None, *, stop: threading.Event | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    key = collector_key(parser, args)
    if args.interval <= 0 or args.settle < 1:
        parser.error("--interval must be > 0 and --settle at least 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from wire.shipper import Pipeline

    registry = CollectorRegistry()
    pipeline = Pipeline(args.spool, url=args.platform_url, key=key, registry=registry)
    reconciler = Reconciler(source=args.source or default_source(args.url), sink=pipeline,
                            state_path=args.state or default_state_path(args.spool), settle=args.settle,
                            from_zero=args.from_zero, registry=registry)  # fmt: skip
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, registry=registry)
    if stop is None:
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    pipeline.start()
    try:
        settled = reconciler.run(args.url, interval=args.interval, stop=stop, once=args.once, timeout=args.timeout,
                                 max_scrapes=args.max_scrapes if args.once else None)  # fmt: skip
        flushed = pipeline.flush(timeout=60 if args.once else 10)
    finally:
        pipeline.close(timeout=10)
    if args.once and not settled:
        print(f"error: not settled after {args.max_scrapes} scrapes (requests kept running?)", file=sys.stderr)
    if not flushed:
        print("error: records are in the spool but not yet shipped; they go with the next run", file=sys.stderr)
    return 0 if (settled or not args.once) and flushed else 1


if __name__ == "__main__":
    sys.exit(main())
