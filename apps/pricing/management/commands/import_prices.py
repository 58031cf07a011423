from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from apps.ingest.models import ServedModel
from apps.pricing.models import validate_whole_hour
from apps.pricing.pricelist import (
    Preview,
    PriceListError,
    pricelist_apply,
    pricelist_parse,
    pricelist_preview,
    pricelist_read,
)
from apps.pricing.services import HOUR, PricingError, hour_floor


def _hour(value: str) -> datetime:
    at = datetime.fromisoformat(value)
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at
    try:
        validate_whole_hour(at)
    except ValidationError as exc:
        raise ValueError(value) from exc
    return at


def _rate(value: str) -> Decimal:
    try:
        found = Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(value) from exc
    if found <= 0:
        raise ValueError(value)
    return found


class Command(BaseCommand):
    help = (
        "Import hosted models' prices from a public price list (LiteLLM's model_prices_and_context_window.json, "
        "or a CSV: model,input,cached_input,output[,reasoning][,currency] per million): the models the platform "
        "serves, and those --model names. Shows what would change; --apply writes it as a new price version."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "location", nargs="?", default=None, help="a file or an http(s) URL (default: COSTPLATFORM_PRICE_LIST)"
        )
        parser.add_argument(
            "--model", action="append", default=[], help="also this listed name or glob (repeatable), e.g. gpt-4o*"
        )
        parser.add_argument(
            "--from",
            dest="start",
            type=_hour,
            default=None,
            help="a whole hour, UTC if no offset (default: next hour)",
        )
        parser.add_argument(
            "--rate", type=_rate, default=None, help="a unit of the list's currency in the book's (default: the day's)"
        )
        parser.add_argument("--currency", default="USD", help="currency of a CSV without a currency column")
        parser.add_argument("--apply", action="store_true", help="write the changes (without it: only show them)")

    def handle(self, *args: Any, **options: Any) -> None:
        location = options["location"] or settings.PRICE_LIST
        if not location:
            raise CommandError("give a price list's path or URL (or set COSTPLATFORM_PRICE_LIST)")
        start = options["start"] or hour_floor(timezone.now()) + HOUR
        try:
            price_list = pricelist_parse(
                text=pricelist_read(location=location), source=location, currency=options["currency"].upper()
            )
            served = ServedModel.objects.values_list("name", flat=True).distinct()
            preview = pricelist_preview(
                price_list=price_list,
                effective_from=start,
                served=served,
                patterns=[*options["model"], *settings.PRICE_LIST_MODELS],
                rate=options["rate"],
            )
        except (PriceListError, PricingError) as exc:
            raise CommandError(str(exc)) from exc
        self._show(preview)
        if not options["apply"] or preview.empty:
            if not preview.empty:
                self.stdout.write("Nothing written: run again with --apply to write these prices.")
            return
        try:
            version = pricelist_apply(preview=preview)
        except (PriceListError, PricingError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"price version {version} written ({len(preview.changes)} prices)"))
        if start < timezone.now():
            self.stdout.write(
                f"Hours from {start:%Y-%m-%d %H:%M} UTC were priced before: reprice them with "
                f"manage.py reprice --from {start:%Y-%m-%d} --to {timezone.now():%Y-%m-%d} "
                "(days of closed months keep their books)."
            )

    def _show(self, preview: Preview) -> None:
        base = preview.base or "no version"
        rate = f", at {preview.rate} {preview.currency} a unit" if preview.rate is not None else ""
        self.stdout.write(f"{preview.source}: from {preview.effective_from:%Y-%m-%d %H:%M} UTC, over {base}{rate}")
        for change in preview.changes:
            before = f"{change.before}" if change.before is not None else "(none)"
            self.stdout.write(f"  {change.pattern:<40} {change.kind:<13} {before:>14} -> {change.after}")
        self.stdout.write(f"{len(preview.changes)} to change, {preview.unchanged} unchanged")
        for pattern in preview.not_listed:
            self.stdout.write(self.style.WARNING(f"  {pattern}: not in the list"))
