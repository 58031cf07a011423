#!/usr/bin/env python
"""Dashboard pages benchmark: every page rendered server-side (Django's test Client, in process:
middleware, view, queries, template) over a month of --records token records, p50 and p95 of
--repeat requests per page after one untimed warm-up, as a finance user and as an engineer
scoped to two business lines (the company-wide rules: try and collectors pages as an engineer
without a scope). Target (issue 7): with 10,000,000 records in the month, every
page <= 300 ms p95.

The month is built as bench/reclassify.py builds it (imported, not copied): its catalogue of
dim sets and models made by the ingest service, the records generated in SQL over --days days
ending yesterday, a price version and a cost pool, VACUUM ANALYZE. Then the product's own jobs
make the rest: `reclassify_run` (classification_hourlyclass), `reprice_run`
(pricing_hourlycost), a budget per business line, `month_accrue` of the month most of the days
fall in (the journal the finance page and the budgets read) and `audit_run` of it (the audit
report).

The drill-down is followed link by link as a person clicks it, with range=30d: class waste ->
the record-decided waste reason with the most tokens (its request list filters on the record's
own fields) -> the top model -> business line -> feature -> step -> requests (and their second
page) -> the first record. For each page the time spent in SQL and the number of queries are
kept; for a page over the target the slowest query is run again under EXPLAIN (ANALYZE,
BUFFERS) and its plan printed and written to the results.

The database named in DATABASE_URL (default costplatform_bench_pages) is DROPPED and
recreated; its name must contain "bench". --reuse keeps it when an earlier run built the same
--records, --days and --seed completely. Results: bench/results/pages-<UTC>.json; see
docs/dashboards.md ("Benchmark").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO), *(p for p in sys.path if Path(p).resolve() != REPO / "bench")]

from bench.ingest import checkout_describe, wait_quiet  # noqa: E402  (the path above first)

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/costplatform_bench_pages"
TARGET_MS = 300.0
TARGET_RECORDS = 10_000_000
META = "bench_pages_meta"
RANGE = "30d"
SCOPED_LINES = 2  # the scoped engineer sees the biggest business line and one from the middle


# --------------------------------------------------------------------------------------------
# The month
# --------------------------------------------------------------------------------------------


def meta_read(url: str) -> dict[str, Any] | None:
    import psycopg

    from costplatform.env import database_from_url

    db = database_from_url(url)
    given = {"host": db["HOST"], "port": db["PORT"], "user": db["USER"]}
    params: dict[str, Any] = {k: v for k, v in given.items() if v}
    try:
        with psycopg.connect(dbname=str(db["NAME"]), **params) as conn:
            row = conn.execute(f"SELECT info FROM {META}").fetchone()  # type: ignore[arg-type]
    except psycopg.Error:
        return None
    return row[0] if row else None


def month_build(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """The records (bench/reclassify.py), then rollups, costs, budgets, journal and audit as the
    product's jobs make them. Returns what was made and how long each step took."""
    from bench import reclassify

    wanted = {"records": args.records, "days": args.days, "seed": args.seed, "audit": not args.no_audit}
    if args.reuse:
        info = meta_read(url)
        if info is not None and all(info.get(k) == v for k, v in wanted.items()):
            print(f"--reuse: the database holds a built month of {args.records:,} records", flush=True)
            reclassify.django_setup(migrate=True)
            info["steps"]["daily rollups (stale days)"] = daily_rollups_refresh()
            info["steps"]["recent_accrue (marked days)"] = ledger_catch_up()
            return info
        print("--reuse: no matching month; building it", flush=True)
    rargs = argparse.Namespace(records=args.records, days=args.days, seed=args.seed, reuse=False)
    began = time.perf_counter()
    made = reclassify.data_prepare(rargs, url)
    steps: dict[str, float] = {"records": time.perf_counter() - began}

    from django.db import connection

    from apps.audits.services import audit_run
    from apps.classification.services import reclassify_run
    from apps.ingest.models import DimSet
    from apps.ledger.services.accrual import month_accrue, month_of
    from apps.plans.planning import budget_set
    from apps.pricing.services import reprice_run

    days = [date.fromisoformat(d) for d in made["days"]]
    start, end = days[0], days[-1] + timedelta(days=1)
    # The month most of the days fall in (the later of two halves): yesterday's would hold one
    # day of records on the 2nd, and the month pages' figures would hang on the date of the run.
    months = [month_of(d) for d in days]
    month = max(sorted(set(months), reverse=True), key=months.count)

    def step(name: str, work: Any) -> Any:
        t = time.perf_counter()
        print(f"{name} ...", flush=True)
        out = work()
        steps[name] = time.perf_counter() - t
        print(f"  {steps[name]:.1f} s", flush=True)
        return out

    step("reclassify_run", lambda: reclassify_run(start=start, end=end))
    step("reprice_run", lambda: reprice_run(start=start, end=end))
    lines = sorted(set(DimSet.objects.exclude(business_line="").values_list("business_line", flat=True)))
    for line in lines:
        budget_set(business_line=line, month=month, amount=Decimal("50000.00"), currency="CNY", tokens=10**10)
    step("month_accrue", lambda: month_accrue(month=month))
    if not args.no_audit:
        step("audit_run", lambda: audit_run(month=month))
    steps["daily rollups"] = daily_rollups_refresh()
    steps["recent_accrue"] = ledger_catch_up()
    with connection.cursor() as cursor:
        for table in ("classification_hourlyclass", "pricing_hourlycost", "ledger_journalline", "ledger_journalentry",
                      "audits_auditfinding", "ingest_dimset"):  # fmt: skip
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("SELECT count(*) FROM classification_hourlyclass")
        class_rows = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM pricing_hourlycost")
        cost_rows = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM ledger_journalline")
        journal_lines = cursor.fetchone()[0]
    info = {**wanted, "days_list": made["days"], "month": f"{month:%Y-%m}", "business_lines": lines,
            "dim_sets": made["dim_sets"], "hourlyclass_rows": class_rows, "hourlycost_rows": cost_rows,
            "journal_lines": journal_lines, "steps": steps}  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {META}")
        cursor.execute(f"CREATE TABLE {META} (info jsonb)")
        cursor.execute(f"INSERT INTO {META} VALUES (%s)", [json.dumps(info)])
    return info


def ledger_catch_up() -> float:
    """What the beat's ledger-accrue-recent does within five minutes (as make demo-data does too):
    the recent months, and those of the days pricing marked (ledger_dirtyday), accrued and the
    marks consumed. Without it every day stays marked as repriced after its accrual, December's
    days are not booked, and each page that reads the books (spend, the waste reconciliation)
    computes again from the priced rows what the journal holds. Returns its seconds."""
    from apps.ledger.services.accrual import recent_accrue

    began = time.perf_counter()
    print("recent_accrue ...", flush=True)
    done = recent_accrue()
    took = time.perf_counter() - began
    print(f"  {took:.1f} s: {', '.join(f'{r.month:%Y-%m} {r.days_computed} day(s)' for r in done)}", flush=True)
    return took


def daily_rollups_refresh() -> float:
    """The refresh job's work (dashboards-refresh-daily-rollups), today included: every day the
    hourly rollups changed is rebuilt into the pages' daily rollups. Returns its seconds."""
    from django.db import connection

    from apps.dashboards.rollup import refresh_stale

    began = time.perf_counter()
    print("daily rollups ...", flush=True)
    done = refresh_stale()
    took = time.perf_counter() - began
    with connection.cursor() as cursor:
        for table in ("dashboards_dailyclass", "dashboards_dailycost", "dashboards_dailylineclass",
                      "dashboards_dailylinecost"):  # fmt: skip
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("SELECT count(*) FROM dashboards_dailyclass")
        rows = cursor.fetchone()[0]
    print(f"  {took:.1f} s: {len(done)} day(s) rebuilt, {rows:,} DailyClass rows", flush=True)
    return took


def users_make(info: dict[str, Any]) -> dict[str, Any]:
    """A finance user, and an engineer scoped to the biggest business line and a middle one."""
    from django.contrib.auth.models import Group, User
    from django.db import connection

    from apps.accounts.models import UserScope

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.business_line FROM classification_hourlyclass c JOIN ingest_dimset d ON d.id = c.dims_id "
            "WHERE d.business_line <> '' GROUP BY 1 ORDER BY sum(c.tokens) DESC"
        )
        ranked = [r[0] for r in cursor.fetchall()]
    scope = [ranked[0], ranked[len(ranked) // 2]][:SCOPED_LINES] if len(ranked) > 1 else ranked
    made = {}
    for name, role in (
        ("bench-finance", "finance"),
        ("bench-engineer", "engineer"),
        ("bench-engineer-all", "engineer"),
    ):
        user, _ = User.objects.get_or_create(username=name)
        user.groups.set([Group.objects.get_or_create(name=role)[0]])
        made[name] = user
    UserScope.objects.update_or_create(
        user=made["bench-engineer"], defaults={"business_lines": sorted(set(scope)), "can_see_money": False}
    )
    return {"finance": made["bench-finance"], "engineer": made["bench-engineer"],
            "engineer-all": made["bench-engineer-all"], "scope": sorted(set(scope))}  # fmt: skip


# --------------------------------------------------------------------------------------------
# The pages
# --------------------------------------------------------------------------------------------


class Hooks(HTMLParser):
    """The elements of a page that carry data-* hooks, each as its attributes (unescaped), in
    document order: the pages are read through the hooks their templates keep for that, not
    through their markup, which changes with their look."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if any(name.startswith("data-") for name, _ in attrs):
            self.found.append({name: value or "" for name, value in attrs})


def hooks_of(page: str) -> list[dict[str, str]]:
    parser = Hooks()
    parser.feed(page)
    parser.close()
    return parser.found


class QueryClock:
    """Django's execute wrapper: the time spent in SQL and the slowest statement of a request."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.seconds = 0.0
        self.count = 0
        self.slowest: tuple[float, str, Any] = (0.0, "", None)

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            took = time.perf_counter() - began
            self.seconds += took
            self.count += 1
            if took > self.slowest[0] and not many:
                self.slowest = (took, sql, params)


WARMED: dict[str, float] = {}  # url -> ms of its first request, made while following the drill-down


def get(client: Any, url: str, *, warm: bool = False) -> str:
    began = time.perf_counter()
    response = client.get(url)
    if warm:
        WARMED[url] = (time.perf_counter() - began) * 1000
    body = b"".join(response.streaming_content) if response.streaming else response.content
    if response.status_code != 200:
        raise SystemExit(f"GET {url}: {response.status_code} {body[:300]!r}")
    return body.decode()


def breakdown_rows(client: Any, url: str) -> list[tuple[str, str]]:
    """(value, link) of each row of a waste breakdown (its rows' data-value and data-href)."""
    hooks = hooks_of(get(client, url, warm=True))
    rows = [(h["data-value"], h["data-href"]) for h in hooks if "data-value" in h and "data-href" in h]
    if not rows:
        raise SystemExit(f"GET {url}: no breakdown rows (no <tr data-value data-href>) on the page")
    return rows


def named_first(rows: list[tuple[str, str]]) -> str:
    """The link of the first row with a value (not "(none)"), else of the first row."""
    return next((href for value, href in rows if value), rows[0][1])


def drill_path(client: Any) -> list[tuple[str, str]]:
    """(page, url) of the drill-down followed link by link, down to one record."""
    from django.urls import reverse

    from apps.dashboards.views import REASON_RECORDS

    path = [("waste: class", reverse("dashboards:waste") + "?" + urlencode({"range": RANGE}))]
    rows = breakdown_rows(client, path[-1][1])
    path.append(("waste: reason", next(href for value, href in rows if value == "waste")))
    rows = breakdown_rows(client, path[-1][1])
    decided = [href for value, href in rows if value in REASON_RECORDS]
    path.append(("waste: model", (decided or [rows[0][1]])[0]))
    for level in ("waste: business_line", "waste: feature", "waste: step", "requests"):
        path.append((level, named_first(breakdown_rows(client, path[-1][1]))))
    hooks = hooks_of(get(client, path[-1][1], warm=True))
    nxt = [h["href"] for h in hooks if "data-next" in h]
    if nxt:
        path.append(("requests: next page", nxt[0]))
    records = [h["data-href"] for h in hooks if "data-href" in h]
    if not records:
        raise SystemExit(f"GET {path[-1][1]}: no request rows (no <tr data-href>) on the page")
    path.append(("record", records[0]))
    return path


def pages_of(role: str, client: Any, info: dict[str, Any]) -> list[tuple[str, str]]:
    from django.urls import reverse

    from apps.classification.models import RuleSet

    month = info["month"]
    if role == "engineer-all":  # the company-wide operations pages, refused to a scoped user
        version = RuleSet.objects.get(status="active").version
        return [("rules: try (newest)", reverse("rules-try", args=[version])), ("collectors", reverse("collectors"))]
    last = date.fromisoformat(info["days_list"][-1])  # the month's records end with yesterday
    overview = reverse("dashboards:overview")
    pages = [("overview", f"{overview}?range={RANGE}"), ("overview (default 7d)", overview),
             ("overview (2 days, hourly)", f"{overview}?from={last - timedelta(days=1)}&to={last}")]  # fmt: skip
    pages += drill_path(client)
    pages += [("audits", reverse("audits"))]
    if info["audit"]:
        pages += [("audit report", reverse("audit-report", args=[month]))]
    pages += [("rules", reverse("rules")), ("prices", reverse("prices"))]
    pages += [("budgets", f"{reverse('budgets')}?month={month}")]
    if role == "finance":
        pages += [("finance", f"{reverse('finance')}?month={month}")]
    return pages


def explain(sql: str, params: Any) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
        return "\n".join(r[0] for r in cursor.fetchall())


def measure(role: str, user: Any, info: dict[str, Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    from django.db import connection
    from django.test import Client

    client = Client()
    client.force_login(user)
    clock = QueryClock()
    results = []
    for name, url in pages_of(role, client, info):
        times, sql_ms, queries = [], [], 0
        first = 0.0
        slowest: tuple[float, str, Any] = (0.0, "", None)
        warmed = url in WARMED  # the drill-down's request was this page's warm-up
        if warmed:
            first = WARMED.pop(url)
        for i in range(int(warmed), args.repeat + 1):
            clock.reset()
            with connection.execute_wrapper(clock):
                began = time.perf_counter()
                get(client, url)
                took = (time.perf_counter() - began) * 1000
            if i == 0:
                first = took
                continue
            times.append(took)
            sql_ms.append(clock.seconds * 1000)
            queries = clock.count
            if clock.slowest[0] > slowest[0]:
                slowest = clock.slowest
            if len(times) >= args.min_repeat and sum(times) / 1000 > args.page_seconds:
                break  # a slow page: fewer samples rather than an hour-long run
        p95 = statistics.quantiles(times, n=20, method="inclusive")[18] if len(times) > 1 else times[0]
        row = {"role": role, "page": name, "url": url, "n": len(times), "first_ms": first,
               "p50_ms": statistics.median(times), "p95_ms": p95,
               "max_ms": max(times), "sql_p50_ms": statistics.median(sql_ms), "queries": queries,
               "slowest_query_ms": slowest[0] * 1000, "pass": p95 <= TARGET_MS}  # fmt: skip
        if not row["pass"] and slowest[1]:
            row["slowest_query"] = slowest[1]
            row["slowest_params"] = [str(p) for p in slowest[2]] if isinstance(slowest[2], list | tuple) else None
            try:
                row["explain"] = explain(slowest[1], slowest[2])
            except Exception as exc:  # a statement EXPLAIN cannot take: say so, keep going
                row["explain"] = f"(no plan: {exc})"
        print(f"  {role:<8} {name:<22} p50 {row['p50_ms']:7.1f} ms  p95 {p95:7.1f} ms  sql {row['sql_p50_ms']:6.1f} ms"
              f" / {queries} queries  {'ok' if row['pass'] else 'MISS'}", flush=True)  # fmt: skip
        results.append(row)
    return results


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/pages.py",
        description=(
            "Dashboard pages benchmark: builds a month of --records records with rollups, costs, journal, budgets "
            "and an audit, then renders every page through Django's test Client as a finance user and as a scoped "
            "engineer, --repeat times each, and prints p50/p95 against the target (300 ms p95 at 10,000,000 "
            "records). DROPS and recreates the database named in DATABASE_URL (default costplatform_bench_pages; "
            "the name must contain 'bench')."
        ),
    )
    add = parser.add_argument
    add("--records", type=int, default=TARGET_RECORDS, help="records generated (10000000)")
    add("--days", type=int, default=30, help="days they are spread over, ending yesterday (30)")
    add("--seed", type=int, default=1, help="random seed of the catalogue and the records (1)")
    add("--repeat", type=int, default=20, help="timed requests per page, after one untimed warm-up (20)")
    add("--page-seconds", type=float, default=60.0,
        help="stop repeating a page once its timed requests took this long, with --min-repeat done (60)")  # fmt: skip
    add("--min-repeat", type=int, default=3, help="timed requests per page however slow it is (3)")
    add("--no-audit", action="store_true", help="skip audit_run (minutes at 10M records); no audit report page")
    add("--reuse", action="store_true", help="keep the database when it holds a built month of the same arguments")
    add("--quiet-wait", type=float, default=30.0, help="wait up to this many seconds for an idle machine (30)")
    add("--json", type=Path, default=None, help="write the results here (bench/results/pages-<UTC>.json)")
    add("--check", action="store_true", help="exit with status 1 when a page misses the target")
    args = parser.parse_args(argv)
    if args.records < 1 or args.days < 1 or args.repeat < 1:
        parser.error("--records, --days and --repeat must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "costplatform.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    print(f"pages benchmark: {args.records:,} records over {args.days} days, {os.cpu_count()} CPUs", flush=True)
    info = month_build(args, url)
    print(f"month {info['month']}: {info['hourlyclass_rows']:,} HourlyClass rows, {info['hourlycost_rows']:,} "
          f"HourlyCost rows, {info['journal_lines']:,} journal lines; built in "
          + ", ".join(f"{k} {v:.0f} s" for k, v in info["steps"].items()), flush=True)  # fmt: skip
    users = users_make(info)
    print(f"scoped engineer sees {', '.join(users['scope'])}", flush=True)
    rows: list[dict[str, Any]] = []
    for role in ("finance", "engineer", "engineer-all"):
        wait_quiet(args.quiet_wait)
        rows += measure(role, users[role], info, args)
    results = {"args": {k: str(v) for k, v in vars(args).items()}, "cpus": os.cpu_count(), "code": checkout_describe(),
               "data": info, "scope": users["scope"], "target_ms": TARGET_MS, "pages": rows}  # fmt: skip
    return report(args, results)


def report(args: argparse.Namespace, results: dict[str, Any]) -> int:
    rows = results["pages"]
    records = results["data"]["records"]
    print(
        f"\n{records:,} records, up to {args.repeat} requests per page after a warm-up (n); "
        f"target p95 <= {TARGET_MS:.0f} ms"
    )
    header = (f"| {'role':<8} | {'page':<22} | {'n':>3} | {'p50 ms':>7} | {'p95 ms':>7} | {'SQL p50 ms':>10} | "
              f"{'queries':>7} | {'first ms':>8} | {'target':>6} |")  # fmt: skip
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for r in rows:
        print(f"| {r['role']:<8} | {r['page']:<22} | {r['n']:>3} | {r['p50_ms']:>7.1f} | {r['p95_ms']:>7.1f} | "
              f"{r['sql_p50_ms']:>10.1f} | {r['queries']:>7} | {r['first_ms']:>8.1f} | "
              f"{'pass' if r['pass'] else 'MISS':>6} |")  # fmt: skip
    missed = [r for r in rows if not r["pass"]]
    for r in missed:
        print(f"\nMISS {r['role']} {r['page']} ({r['url']}): p95 {r['p95_ms']:.0f} ms; slowest query "
              f"{r['slowest_query_ms']:.0f} ms:")  # fmt: skip
        print(r.get("slowest_query", "")[:800])
        print(r.get("explain", ""))
    print(f"\n{len(rows) - len(missed)} of {len(rows)} pages within {TARGET_MS:.0f} ms p95")
    path = args.json or REPO / "bench" / "results" / f"pages-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"results written to {path}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
