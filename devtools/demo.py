"""The end-to-end part of `make run` (devtools/run.py): a local webhook receiver registered
as an alert channel, the tiny model served by the instrumented vLLM on the CPU shipping to the
platform, and the workload of devtools/workload.py driven through it.

The receiver keeps every message it gets: it prints a line per message on the terminal, appends
them to DATA_DIR/logs/webhook.log and shows them at its own address (a page that refreshes)."""

from __future__ import annotations

import html
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

VLLM_KEY = "vllm-demo"
CHANNEL = "demo webhook receiver"
SERVED_MODEL = "tiny-llama"
VLLM_TIMEOUT_S = 600
Say = Callable[[str], None]


class WebhookReceiver:
    """A loopback HTTP server: POST anywhere stores a message, GET / lists them (newest first),
    GET /messages.json returns them as JSON."""

    def __init__(self, log: Path, say: Say, port: int = 0) -> None:
        self.messages: list[dict[str, Any]] = []
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.keep(body, say)
                self._answer(200, b'{"ok": true}', "application/json")

            def do_GET(self) -> None:
                if self.path.startswith("/messages.json"):
                    self._answer(200, json.dumps(receiver.messages).encode(), "application/json")
                else:
                    self._answer(200, receiver.page().encode(), "text/html; charset=utf-8")

            def _answer(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keep(self, body: bytes, say: Say) -> None:
        try:
            message = json.loads(body)
        except ValueError:
            message = {"title": body.decode(errors="replace")[:200]}
        message = {"received_at": datetime.now(UTC).isoformat(timespec="seconds"), **message}
        self.messages.append(message)
        with self.log.open("a") as handle:
            handle.write(json.dumps(message, ensure_ascii=False) + "\n")
        state = "resolved" if message.get("resolved") else message.get("severity", "")
        say(f"webhook received: [{state}] {message.get('title', '')}")

    def page(self) -> str:
        def row(m: dict[str, Any]) -> str:
            when, severity, title, body = (
                html.escape(str(m.get(k, ""))) for k in ("received_at", "severity", "title", "text")
            )
            return f"<tr><td>{when}</td><td>{severity}</td><td><b>{title}</b><pre>{body}</pre></td></tr>"

        style = "body{font-family:sans-serif;margin:1em}td{vertical-align:top;border-top:1px solid #ccc;padding:.4em}"
        return (
            "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=5>"
            "<meta name=viewport content='width=device-width'><title>webhook receiver</title>"
            f"<style>{style}pre{{white-space:pre-wrap;margin:.3em 0}}</style>"
            f"<h1>Alerts received ({len(self.messages)})</h1>"
            f"<table>{''.join(map(row, reversed(self.messages)))}</table>"
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def channel_register(url: str) -> str:
    """The webhook channel pointing at the receiver (its URL updated on every run), and a test
    message through it. apps.alerts has no create service: the model is written as the admin does."""
    from apps.alerts.models import Channel, Severity
    from apps.alerts.services import channel_enable, channel_send_test

    channel, created = Channel.objects.get_or_create(
        name=CHANNEL, defaults={"kind": Channel.Kind.WEBHOOK, "language": "en", "min_severity": Severity.INFO}
    )
    channel.url = f"{url}/hook"
    channel.save(update_fields=["url"])
    channel_enable(channel=channel)
    channel_send_test(channel=channel)
    return f"{'created' if created else 'updated'} alert channel '{CHANNEL}' -> {url}/hook; a test message is queued"


def demo_config(*, now: datetime, campaign: tuple[datetime, datetime]) -> list[str]:
    """What the workload needs to show up everywhere: a price for the tiny model,
    token budgets this month that the workload passes, the campaign as an elastic window, and
    budget and health rules evaluated every minute (not 5) so their alerts come during the run."""
    from apps.alerts.models import Rule
    from apps.common.buckets import hour_floor, month_of
    from apps.ledger.models import ElasticWindow
    from apps.plans.planning import budget_set
    from apps.pricing.models import Price
    from apps.pricing.services import price_set

    hour = hour_floor(now)
    notes = []
    if not Price.objects.filter(model_pattern=SERVED_MODEL).exists():
        # A price rather than a pool: a pool's cost is allocated once its hour has ended, and the
        # demo should show money while it runs.
        prices = {"input": Decimal("1"), "cached_input": Decimal("0.2"), "output": Decimal("4")}
        price_set(model_pattern=SERVED_MODEL, prices=prices, effective_from=hour)
        notes.append(f"price of {SERVED_MODEL} from {hour:%H:00}: 1 / 0.2 / 4 CNY per million input / cached / output")
    month = month_of(now)  # the accounting month
    for line, tokens in (("customer-service", 1_500_000), ("marketing", 300_000), ("payments", 150_000)):
        budget_set(business_line=line, month=month, tokens=tokens)
    notes.append("token budgets this month: customer-service 1.5M, marketing 300k, payments 150k (80 % alerts)")
    ElasticWindow.objects.create(
        business_line="marketing", name=f"demo campaign {now:%m-%d %H:%M}", start=campaign[0], end=campaign[1]
    )
    notes.append(f"campaign window for marketing {campaign[0]:%H:%M:%S}-{campaign[1]:%H:%M:%S} UTC (elastic expense)")
    Rule.objects.filter(detector__in=["budget", "health", "dead_letters"]).update(every=timedelta(minutes=1))
    return notes


def tiny_model(data_dir: Path) -> tuple[Path, str]:
    from devtools.tiny_model import build_tiny_model

    path = data_dir / "tiny-llama"
    if (path / "config.json").exists():
        return path, "present"
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Writing model shards" would break the terminal's lines
    started = time.monotonic()
    build_tiny_model(path)
    return path, f"built in {time.monotonic() - started:.1f} s"


def attribution_map(data_dir: Path) -> tuple[Path, str]:
    """The server's attribution map: the workload's apps, each billed to its line and team. Kept
    in the data dir and left as it is once there, so an operator's edits survive a rerun (the
    server re-reads it when it changes)."""
    from devtools import workload

    path = data_dir / "attribution.toml"
    if path.exists():
        return path, "present"
    path.write_text(workload.attribution_map())
    return path, "written"


def vllm_command(
    *, model: Path, platform_url: str, key_file: Path, data_dir: Path, port: int, attribution: Path
) -> list[str]:
    """`python -m serving` as tests/processes.py VllmServer starts it."""
    return [
        sys.executable, "-m", "serving",
        "--model", str(model), "--served-model-name", SERVED_MODEL,
        "--costplatform-url", platform_url, "--collector-key-file", str(key_file),
        "--spool", str(data_dir / "spool"), "--source", VLLM_KEY, "--dims", "env=demo",
        "--attribution-map", str(attribution),
        "--model-version", "random-fp32", "--port", str(port), "--host", "127.0.0.1",
        "--max-model-len", "4096", "--enable-prefix-caching", "--dtype", "float32",
    ]  # fmt: skip


def vllm_env(base: dict[str, str]) -> dict[str, str]:
    return base | {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "COSTPLATFORM_STATS_WAIT": "2",
    }


def wait_vllm(url: str, running: Callable[[], bool], tail: Callable[[], str]) -> float:
    started = time.monotonic()
    while time.monotonic() - started < VLLM_TIMEOUT_S:
        if not running():
            raise RuntimeError(f"vLLM exited before it answered:\n{tail()}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5):
                return time.monotonic() - started
        except (urllib.error.URLError, OSError):
            time.sleep(1)
    raise RuntimeError(f"vLLM did not answer {url}/health within {VLLM_TIMEOUT_S} s:\n{tail()}")


def records_summary() -> list[str]:
    """What the platform stored from the vLLM server: records by business line and status."""
    from django.db import connection

    sql = (
        "SELECT d.business_line, r.status, count(*), sum(r.prompt), sum(r.prompt_cached), sum(r.completion) "
        "FROM ingest_record r JOIN ingest_dimset d ON d.id = r.dims_id JOIN accounts_collectorkey k "
        "ON k.id = r.source_id WHERE k.name = %s GROUP BY 1, 2 ORDER BY 1, 2"
    )
    from apps.ingest.models import Status

    with connection.cursor() as cursor:
        cursor.execute(sql, [VLLM_KEY])
        rows = cursor.fetchall()
    names = dict(Status.choices)
    return [
        f"  {line or '(none)':<18} {names[status]:<8} {count:>6} records, prompt {prompt:>9,} "
        f"(cached {cached:,}), completion {completion:>8,}"
        for line, status, count, prompt, cached, completion in rows
    ]


def _wait_records(count: Callable[[], int], quiet_s: float = 6, limit_s: float = 60) -> int:
    """Wait until the stored count stops growing for `quiet_s` (the shipper's last batches)."""
    deadline, last, since = time.monotonic() + limit_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        now = count()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        time.sleep(1)
    return last


def _vllm_records() -> int:
    from apps.ingest.models import Record

    return Record.objects.filter(source__name=VLLM_KEY).count()


def end_to_end(
    args: Any, *, data_dir: Path, base_url: str, env: dict[str, str], children: list[Any], receiver: WebhookReceiver
) -> None:
    """After the platform is up: the alert channel, the vLLM server (a child like the others,
    stopped with them), the configuration the workload needs, the workload, and a summary."""
    from devtools import workload
    from devtools.run import Child, RunError, ensure_demo_key, price_loaded, say

    say(channel_register(receiver.url))
    # The vLLM host's key: a /metrics reconciler beside it ships reconciliation records with it.
    secret, note = ensure_demo_key(data_dir, VLLM_KEY, reconciliation=True)
    say(f"collector key '{VLLM_KEY}': {note}")
    if secret is None:
        raise RunError(f"the collector key '{VLLM_KEY}' is revoked: vLLM cannot ship records")
    model, how = tiny_model(data_dir)
    say(f"tiny model ({SERVED_MODEL}, random weights): {how} in {model}")
    amap, how = attribution_map(data_dir)
    say(f"attribution map (who pays for which API key; edit it while vLLM runs): {how} in {amap}")
    vllm_url = f"http://127.0.0.1:{args.vllm_port}"
    command = vllm_command(
        model=model, platform_url=base_url, key_file=data_dir / f"collector_key_{VLLM_KEY}", data_dir=data_dir,
        port=args.vllm_port, attribution=amap,
    )  # fmt: skip
    child = Child("vllm", command, data_dir / "logs" / "vllm.log", vllm_env(env))
    children.append(child)
    say(f"started vllm (pid {child.process.pid}); the engine takes a minute or two to start on the CPU …")
    try:
        waited = wait_vllm(vllm_url, child.running, child.tail)
    except RuntimeError as exc:
        raise RunError(str(exc)) from exc
    say(f"vllm: {vllm_url}/health answered after {waited:.0f} s")

    seconds = float(args.workload_seconds)
    now = datetime.now(UTC)
    first, last = (now + share * timedelta(seconds=seconds) for share in workload.phase_span("campaign"))
    for line in demo_config(now=now, campaign=(first, last)):
        say(line)
    before = _vllm_records()
    say(f"workload: {seconds:.0f} s through {vllm_url} (progress every 10 s) …")
    stats = workload.run(vllm_url, seconds=seconds, progress=lambda line: say(f"workload {line}"))
    say(f"workload done: {stats.line()}")
    stored = _wait_records(_vllm_records)
    say(f"the platform stored {stored - before} records from vLLM in this run ({stored} in all):")
    for line in records_summary():
        print(line, flush=True)
    say(f"cost of the stored tokens: {price_loaded()}")
    say(
        f"alerts at the webhook receiver so far: {len(receiver.messages)} ({receiver.url}/); the rules keep "
        "evaluating every 30-60 s while this runs"
    )
