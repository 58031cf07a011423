"""Plotly figures of the dashboards, drawn by the locally served plotly.js."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go
from django.utils.translation import gettext as _

from apps.common.buckets import accounting_zone
from apps.common.charts import chart_html, themed

CLASS_COLOURS = {"effective": "#2e7d32", "cache": "#1565c0", "waste": "#c62828", "shadow": "#6d4c41"}


def _local(at: datetime) -> datetime:
    """The wall time in the accounting zone: plotly.js draws a date-time as written, offset ignored."""
    return at.astimezone(accounting_zone()).replace(tzinfo=None)


def class_series_figure(
    series: dict[str, dict[datetime, int]], class_labels: dict[str, str], *, granularity: str = "hour"
) -> str:
    """Stacked bars of tokens per class over time (periods of `granularity`: hour or day), as an
    HTML fragment (div + script)."""
    periods = sorted({p for by_period in series.values() for p in by_period})
    fig = go.Figure(
        [
            go.Bar(
                name=str(class_labels.get(name, name)),
                x=[_local(p) for p in periods],
                y=[by_period.get(p, 0) for p in periods],
                marker_color=CLASS_COLOURS.get(name),
            )
            for name, by_period in series.items()
        ]
    )
    themed(fig, period=granularity)
    fig.update_layout(yaxis_title=_("tokens"))
    return chart_html(fig, div_id="tokens-by-class")


def sparkline_figure(points: list[int], *, div_id: str) -> str:
    """A small line of waste tokens per period, without axes: the trend of one table row. The
    overview draws ten: each is the one figure's JSON with its points (building and styling a
    plotly figure took 17 ms a line)."""
    base = _sparkline()
    return chart_html(
        {"data": [{**base["data"][0], "y": list(points)}], "layout": base["layout"]}, div_id=div_id, static=True
    )


@lru_cache(maxsize=1)
def _sparkline() -> dict[str, Any]:
    colour = CLASS_COLOURS["waste"]
    # Markers too: a window of one period is one point, which a line alone does not draw.
    line = go.Scatter(y=[0], mode="lines+markers", line={"color": colour, "width": 2}, marker={"size": 4})
    fig = themed(go.Figure([line]), height=32)
    fig.update_layout(
        width=140,
        margin={"l": 0, "r": 0, "t": 2, "b": 2},
        xaxis={"visible": False},
        yaxis={"visible": False, "rangemode": "tozero"},
        showlegend=False,
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return fig.to_plotly_json()
