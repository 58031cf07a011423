"""The prices page: the models with tokens but no price or pool (every role: they say what to
set up), and for money readers the price versions and cost pools (edited in the admin)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.accounts.roles import reader_required
from apps.accounts.scopes import sees_money
from apps.pricing.models import CostPool, PriceVersion
from apps.pricing.selectors import unpriced_models_recent


@reader_required
def prices(request: HttpRequest) -> HttpResponse:
    money = sees_money(request.user)
    context = {
        "money": money,
        "versions": PriceVersion.objects.prefetch_related("prices")[:20] if money else [],
        "pools": CostPool.objects.all() if money else [],
        "unpriced": unpriced_models_recent(),
    }
    return render(request, "pricing/prices.html", context)
