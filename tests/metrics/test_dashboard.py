"""docs/grafana/costplatform.json parses, and its queries and docs/metrics.md name only series
/metrics exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from apps.metrics.collector import platform_collector

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"
NAME = re.compile(r"\bcostplatform_[a-z0-9_]+")


def exported(client: Client) -> set[str]:
    platform_collector.clear()
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    names = set()
    for family in text_string_to_metric_families(text):
        # A counter's family is named without _total; its samples (the series) with it.
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "histogram":
            names.update(f"{family.name}_{part}" for part in ("bucket", "sum", "count"))
    return names


def test_the_dashboard_queries_only_exported_series(db: None, client: Client) -> None:
    dashboard = json.loads((DOCS / "grafana" / "costplatform.json").read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    exprs = [target["expr"] for panel in panels for target in panel["targets"]]
    assert panels and all(panel["targets"] for panel in panels)
    used = {name for expr in exprs for name in NAME.findall(expr)}
    names = exported(client)
    assert used - names == set()
    # Issue 7 item 5: tokens, cost, ingest rate and lag, rejections and alert deliveries.
    core = {
        "costplatform_tokens_24h",
        "costplatform_cost_24h",
        "costplatform_ingest_records_total",
        "costplatform_ingest_lag_seconds",
        "costplatform_rejections_1h",
        "costplatform_alert_notifications_24h",
        "costplatform_health_ratio_24h",
    }
    assert core <= used


def test_the_docs_describe_every_exported_family(db: None, client: Client) -> None:
    documented = set(NAME.findall((DOCS / "metrics.md").read_text()))
    families = {n for n in exported(client) if n.startswith("costplatform_")}
    families -= {n for n in families if n.endswith(("_bucket", "_sum", "_count", "_created"))}
    assert families - documented == set()
    assert documented - families == set(), "the docs name a series /metrics does not export"
