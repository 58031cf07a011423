from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from apps.pricing.models import Currency, Kind
from apps.pricing.services import HOUR, PricingError, hour_floor, hours_mark_dirty, price_set

MARK_DIRTY_HOURS = 48


def _decimal(value: str) -> Decimal:
    try:
        return Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(value) from exc


def _hour(value: str) -> datetime:
    at = datetime.fromisoformat(value)
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


class Command(BaseCommand):
    help = (
        "Set a model's prices per million tokens from a time on: a new price version copying the one "
        "in force then (or the version starting exactly then, updated)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, help="model name or glob, e.g. qwen2.5-*")
        parser.add_argument("--input", type=_decimal, required=True)
        parser.add_argument("--cached-input", type=_decimal, required=True)
        parser.add_argument("--output", type=_decimal, required=True)
        parser.add_argument(
            "--reasoning", type=_decimal, default=None, help="reasoning tokens' own price (default: priced as output)"
        )
        parser.add_argument(
            "--cache-write",
            type=_decimal,
            default=None,
            help="prompt-cache writes' own price (default: priced as input)",
        )
        parser.add_argument("--currency", choices=Currency.values, default=None, help="default: that of the base")
        parser.add_argument(
            "--from", dest="start", type=_hour, default=None, help="whole hour, UTC if no offset (default: this hour)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        start = options["start"] or hour_floor(timezone.now())
        prices = {
            Kind.INPUT: options["input"],
            Kind.CACHED_INPUT: options["cached_input"],
            Kind.OUTPUT: options["output"],
        }
        if options["reasoning"] is not None:
            prices[Kind.REASONING] = options["reasoning"]
        if options["cache_write"] is not None:
            prices[Kind.CACHE_WRITE] = options["cache_write"]
        try:
            version = price_set(
                model_pattern=options["model"], prices=prices, effective_from=start, currency=options["currency"]
            )
        except (PricingError, ValidationError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"{options['model']}: {version}"))
        self._reprice_hint(start)

    def _reprice_hint(self, start: datetime) -> None:
        """Hours already priced under the old prices: a few are marked for the minute job, more
        need an explicit reprice."""
        now_hour = hour_floor(timezone.now())
        if start > now_hour:
            return
        span = (now_hour - start) // HOUR + 1
        if span <= MARK_DIRTY_HOURS:
            hours_mark_dirty(hours=[start + i * HOUR for i in range(span)])
            self.stdout.write(f"{span} hour(s) from {start:%Y-%m-%d %H:%M} will be repriced within a minute")
        else:
            end = now_hour.date() + timedelta(days=1)
            self.stdout.write(
                f"hours already priced keep their cost until: manage.py reprice --from {start.date()} --to {end}"
            )
