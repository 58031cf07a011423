"""One chart theme for every plotly figure (the dashboards, the finance page, the overview's
sparklines): the pages' type and colours, one margin and legend, time axes drawn as dates, and a
chart of one period that says so (a narrow bar labelled with its period and a note) instead of
one bar stretched over the whole width."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from django.utils.translation import gettext as _

from apps.common.csp import csp_nonce

FONT = {"family": "system-ui, -apple-system, 'Segoe UI', 'PingFang SC', 'Microsoft YaHei', sans-serif", "size": 12}
INK, GRID = "#1d2433", "#e4e7ef"
# Effective, cache, waste, shadow first (the dashboards' class colours), then calm neighbours.
COLOURS = ["#2e7d32", "#1565c0", "#c62828", "#6d4c41", "#00838f", "#8e24aa", "#f9a825", "#5d6d7e"]
# A period's length, its axis tick format, and what one of them alone is called.
PERIODS: dict[str, tuple[timedelta, str]] = {
    "hour": (timedelta(hours=1), "%m-%d %H:%M"),
    "day": (timedelta(days=1), "%Y-%m-%d"),
    "month": (timedelta(days=30), "%Y-%m"),
}


def _one_period_note(period: str) -> str:
    notes = {"hour": _("One hour so far"), "day": _("One day so far"), "month": _("One month so far")}
    return notes[period]


def themed(fig: go.Figure, *, period: str = "", height: int = 320, barmode: str = "stack") -> go.Figure:
    """`fig` in the house style. `period` ("hour", "day", "month") names a time x axis: it is drawn
    as dates, and a single period is drawn narrow with a note rather than across the width."""
    fig.update_layout(
        font={**FONT, "color": INK},
        colorway=COLOURS,
        height=height,
        barmode=barmode,
        # The axes take the room their labels need (automargin below); the legend sits above the
        # plot, where a long or turned axis label cannot run into it.
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        paper_bgcolor="#fff",
        plot_bgcolor="#fff",
        hoverlabel={"font": FONT},
    )
    fig.update_xaxes(gridcolor=GRID, linecolor=GRID, automargin=True)
    fig.update_yaxes(gridcolor=GRID, linecolor=GRID, zerolinecolor=GRID, rangemode="tozero", automargin=True)
    if period:
        _date_axis(fig, period)
    return fig


def _date_axis(fig: go.Figure, period: str) -> None:
    width, ticks = PERIODS[period]
    fig.update_xaxes(type="date", tickformat=ticks, hoverformat=ticks)
    if period == "month":
        fig.update_xaxes(dtick="M1")
    xs = {_instant(x) for trace in fig.data for x in (trace.x or ())}
    if len(xs) != 1:
        return
    (only,) = xs
    fig.update_traces(width=width.total_seconds() * 1000 * 0.6, selector={"type": "bar"})
    fig.update_xaxes(range=[only - 3 * width, only + 3 * width], tickvals=[only], ticktext=[only.strftime(ticks)])
    fig.add_annotation(
        text=_one_period_note(period),
        xref="paper",
        yref="paper",
        x=1,
        y=1.08,
        showarrow=False,
        font={"color": "#4a5468"},
    )


def _instant(x: Any) -> datetime:
    """A time axis value (a datetime, a date, or "YYYY-MM" / ISO text) as a datetime."""
    if isinstance(x, datetime):
        return x
    if isinstance(x, date):
        return datetime(x.year, x.month, x.day)
    text = str(x)
    return datetime.fromisoformat(f"{text}-01" if len(text) == 7 else text)


def month_axis(months: list[str]) -> list[str]:
    """Months as "YYYY-MM" to the first day of each: a date axis reads them as dates."""
    return [f"{m}-01" for m in months]


def chart_html(fig: go.Figure | dict[str, Any], *, div_id: str | None = None, static: bool = False) -> str:
    """The figure as an HTML fragment for the locally served plotly.js; a figure's JSON (as
    `go.Figure.to_plotly_json` gives it) is written as it is, without building the figure again."""
    config: dict[str, Any] = {"displayModeBar": False, "staticPlot": True} if static else {}
    config.update({"displaylogo": False, "responsive": not static})
    options: dict[str, Any] = {"full_html": False, "include_plotlyjs": False, "div_id": div_id, "config": config}
    html: str = fig.to_html(**options) if isinstance(fig, go.Figure) else pio.to_html(fig, validate=False, **options)
    # The figure's inline script runs under the page's Content-Security-Policy with its nonce.
    return html.replace("<script>", f'<script nonce="{csp_nonce()}">', 1)
