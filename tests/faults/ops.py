"""What the fault suite asks of the platform's own code, run as a separate process on the
database under test (DATABASE_URL), so the test process never holds a Django connection to it:

    python -m tests.faults.ops setup --keys a,b        collector keys and a price; prints JSON
    python -m tests.faults.ops settle --from D --to D  price the dirty hours, accrue; the ledger as JSON
    python -m tests.faults.ops ruleset                 activate a rule set that moves tokens
    python -m tests.faults.ops jobs                    the same, and price every dirty hour
    python -m tests.faults.ops clean --month M --from D --to D   a close and a reclassify, nothing killed
    python -m tests.faults.ops sweep                   the alerts sweep, as 10 minutes after a worker died
    python -m tests.faults.ops broadcast --urls U,V --count N --prefix P   alerts to webhook channels
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import django


def setup(args: argparse.Namespace) -> Any:
    from apps.accounts.services import collector_key_create
    from tests import factories

    factories.price_version(effective_from=datetime(2020, 1, 1, tzinfo=UTC), prices={"qwen*": ("2.00", "0.50", "8.00")})
    keys = {}
    for name in args.keys.split(","):
        created = collector_key_create(name=name, backfill=True)  # the suite sends months past
        keys[name] = {"secret": created.secret, "id": created.key.pk}
    return keys


def settle(args: argparse.Namespace) -> Any:
    """What beat would do after ingest: price every dirty hour, accrue the days, then read the ledger."""
    from apps.ledger.models import JournalLine
    from apps.ledger.selectors import trial_balance
    from apps.ledger.services.accrual import range_accrue
    from apps.ledger.services.periods import month_totals
    from apps.pricing.models import DirtyHour
    from apps.pricing.services import dirty_hours_price

    while DirtyHour.objects.exists():
        dirty_hours_price()
    list(range_accrue(start=args.start, end=args.end))
    return ledger_state(JournalLine, trial_balance, month_totals)


def ledger_state(journal_line: Any, trial_balance: Any, month_totals: Any) -> dict[str, Any]:
    months = sorted(set(journal_line.objects.values_list("period_id", flat=True)))
    return {
        f"{month:%Y-%m}": {
            "trial_balance": [
                {
                    "currency": c["currency"],
                    "debits": str(c["debits"]),
                    "credits": str(c["credits"]),
                    "balanced": c["balanced"],
                }
                for c in trial_balance(month=month)["currencies"]
            ],
            "totals": [
                {"currency": t.currency, "booked": str(t.booked), "priced": str(t.priced)}
                for t in month_totals(month=month)
            ],
        }
        for month in months
    }


def ruleset(args: argparse.Namespace) -> Any:
    from tests.classification.helpers import ruleset_activated

    activated = ruleset_activated(
        moves=[('dims.team == "team-1"', "completion", "waste.team_one")], disabled=["prefix_cache"]
    )
    return {"version": activated.version}


def jobs(args: argparse.Namespace) -> Any:
    """Before the jobs run: a new active rule set for the reclassify, and every dirty hour priced."""
    from apps.pricing.models import DirtyHour
    from apps.pricing.services import dirty_hours_price

    version = ruleset(args)["version"]
    while DirtyHour.objects.exists():
        dirty_hours_price()
    return {"version": version}


def clean(args: argparse.Namespace) -> Any:
    """The reference: the month close and the reclassify run in one process, nothing killed."""
    from apps.classification.services import reclassify_run
    from apps.ledger.services.periods import parse_month, period_close

    period_close(month=parse_month(args.month))
    return {"run": reclassify_run(start=args.start, end=args.end).pk}


def broadcast(args: argparse.Namespace) -> Any:
    from django.utils import timezone

    from apps.alerts.models import Channel
    from apps.alerts.services import broadcast as send

    Channel.objects.update(disabled_at=timezone.now(), disabled_reason="an earlier fault run")
    for n, url in enumerate(args.urls.split(",")):
        Channel.objects.create(name=f"{args.prefix}-hook-{n}", kind="webhook", url=url, language="en", min_severity=10)
    ids = []
    for n in range(args.count):
        notifications = send(
            title=f"{args.prefix}-{n}", body_markdown="fault suite", link="http://127.0.0.1/", business_line=None,
            severity="warning", kind="faults",
        )  # fmt: skip
        ids.extend(x.id for x in notifications)
    return {"notifications": ids}


def sweep(args: argparse.Namespace) -> Any:
    """The alerts-notifications-due beat job as it runs 10 minutes after a worker died mid-send:
    attempts left `sending` marked failed, due ones sent again."""
    from datetime import timedelta

    from apps.alerts.services import notifications_due
    from apps.alerts.tasks import notification_send

    due = notifications_due(stale_after=timedelta(0))
    for notification_id in due:
        notification_send.delay(notification_id)
    return {"due": due}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.ops")
    sub = parser.add_subparsers(dest="op", required=True)
    sub.add_parser("setup").add_argument("--keys", required=True)
    p = sub.add_parser("settle")
    p.add_argument("--from", dest="start", type=date.fromisoformat, required=True)
    p.add_argument("--to", dest="end", type=date.fromisoformat, required=True)
    sub.add_parser("ruleset")
    sub.add_parser("jobs")
    sub.add_parser("sweep")
    p = sub.add_parser("clean")
    p.add_argument("--month", required=True)
    p.add_argument("--from", dest="start", type=date.fromisoformat, required=True)
    p.add_argument("--to", dest="end", type=date.fromisoformat, required=True)
    p = sub.add_parser("broadcast")
    p.add_argument("--urls", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--prefix", required=True)
    return parser


OPS = {
    "setup": setup,
    "settle": settle,
    "ruleset": ruleset,
    "jobs": jobs,
    "clean": clean,
    "broadcast": broadcast,
    "sweep": sweep,
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    django.setup()
    print(json.dumps(OPS[args.op](args), default=lambda v: str(v) if isinstance(v, Decimal | date) else repr(v)))
    return 0


if __name__ == "__main__":
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costplatform.settings")
    sys.exit(main())
