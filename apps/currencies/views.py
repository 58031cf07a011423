"""The exchange rates page (finance and admin): the functional currency, the days waiting for a
rate (their foreign-currency costs are not booked until it is entered), the rates of recent
days, a form for one rate and a CSV upload (date,currency,rate,source[,to]); a file with a bad
row is refused whole, each bad row listed with its reason. Entering rates is a company-wide act,
like the close: each save is audit-logged and the next accrual books the day at it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.scopes import business_lines_of, finance_act_check
from apps.common.csvcells import csv_text
from apps.currencies.links import PAGES
from apps.currencies.models import ExchangeRate, MissingRate
from apps.currencies.rates import COLUMNS, RateError, functional_currency, rate_set, rates_import
from apps.pricing.models import Currency

# The words of the bill adjustments' refusals, as the rates page has always answered with them.
NEEDS_FINANCE = gettext_noop("bill adjustments need the finance or admin role")
COMPANY_ACT = gettext_noop(
    "bill adjustments are a company-wide act: they need a user who sees every business line "
    "(yours is limited to some lines)"
)
MAX_RATES_BYTES = 2 * 1024 * 1024
SHOWN = 90  # the most recent rates listed


@require_GET
@login_required
def rates_page(request: HttpRequest) -> HttpResponse:
    finance_act_check(request.user, refused=NEEDS_FINANCE)
    functional = functional_currency()
    context: dict[str, Any] = {
        "functional": functional,
        "missing": MissingRate.objects.order_by("-day", "currency")[:SHOWN],
        "rates": ExchangeRate.objects.select_related("entered_by")[:SHOWN],
        "currencies": [c for c in Currency.values if c != functional],
        "columns": ",".join(COLUMNS),
        "company": business_lines_of(request.user) is None,
        "finance": PAGES.link("finance"),
    }
    return render(request, "currencies/rates.html", context)


@require_POST
@login_required
def rates_act(request: HttpRequest) -> HttpResponse:
    """Enter one rate (`action=set`) or upload a CSV of rates (`action=import`)."""
    finance_act_check(request.user, refused=NEEDS_FINANCE, company_wide=COMPANY_ACT)
    try:
        done = _import(request) if request.POST.get("action") == "import" else _set(request)
    except RateError as exc:
        messages.error(request, _("Nothing was saved: %(errors)s") % {"errors": "; ".join(exc.errors)})
    else:
        messages.success(request, done)
    return redirect(reverse("finance-rates"))


def _set(request: HttpRequest) -> str:
    post = request.POST
    rate = rate_set(
        day=post.get("day", ""), currency=post.get("currency", ""), rate=post.get("rate", ""),
        source=post.get("source", ""), user=request.user,
    )  # fmt: skip
    return _("%(day)s %(pair)s = %(rate)s saved; the next accrual books the day at it.") % {
        "day": rate.day,
        "pair": rate.pair,
        "rate": rate.rate.normalize(),
    }


def _import(request: HttpRequest) -> str:
    upload = request.FILES.get("file")
    if upload is None:
        raise RateError([_("choose the rates' CSV file")])
    if upload.size is not None and upload.size > MAX_RATES_BYTES:
        raise RateError([_("the file is larger than 2 MB")])
    text = csv_text(upload.read())
    if text is None:
        raise RateError([_("the file is neither UTF-8 nor GB18030 text")])
    saved = rates_import(text=text, user=request.user)
    return _("%(count)s rates imported.") % {"count": len(saved)}


urlpatterns = [
    path("finance/rates/", rates_page, name="finance-rates"),
    path("finance/rates/act/", rates_act, name="finance-rates-act"),
]
