"""FOCUS 1.4 column requirements as data, and a checker that holds exported rows to them.

Each dataset's columns: data type, whether null is allowed, and the allowed values where the
specification lists them; then the requirements between columns that apply to an internal
recharge of LLM tokens (no commitments, capacity reservations, regions, split allocation or
payable invoices in the cost and usage dataset). `violations` returns every broken requirement,
so a test can show that a broken row is caught as well as that an export passes.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

DECIMAL, STRING, DATETIME, JSON = "Decimal", "String", "Date/Time", "JSON"


@dataclass(frozen=True)
class Column:
    type: str
    nullable: bool
    allowed: frozenset[str] | None = None


def _allowed(*values: str) -> frozenset[str]:
    return frozenset(values)


CHARGE_CATEGORIES = _allowed("Usage", "Purchase", "Tax", "Credit", "Adjustment")
SERVICE_CATEGORIES = _allowed(
    "AI and Machine Learning", "Analytics", "Business Applications", "Compute", "Databases", "Developer Tools",
    "Multicloud", "Identity", "Integration", "Internet of Things", "Management and Governance", "Media",
    "Migration", "Mobile", "Networking", "Security", "Storage", "Web", "Other",
)  # fmt: skip
AI = "AI and Machine Learning"  # the parent of the subcategories below
AI_SUBCATEGORIES = _allowed(
    "AI Platforms", "Bots", "Generative AI", "Machine Learning", "Natural Language Processing",
    "Other (AI and Machine Learning)",
)  # fmt: skip

# Cost and Usage: the mandatory columns and the conditional ones whose condition holds here
# (usage measurement, unit pricing and price lists, sub accounts, provisioned resources, tags,
# several billing account and sub account types, pricing in another currency than billing).
COST_AND_USAGE = {
    "BilledCost": Column(DECIMAL, False),
    "BillingAccountId": Column(STRING, False),
    "BillingAccountName": Column(STRING, True),
    "BillingAccountType": Column(STRING, False),
    "BillingCurrency": Column(STRING, False),
    "BillingPeriodEnd": Column(DATETIME, False),
    "BillingPeriodStart": Column(DATETIME, False),
    "ChargeCategory": Column(STRING, False, CHARGE_CATEGORIES),
    "ChargeClass": Column(STRING, True, _allowed("Correction")),
    "ChargeDescription": Column(STRING, True),
    "ChargeFrequency": Column(STRING, False, _allowed("One-Time", "Recurring", "Usage-Based")),
    "ChargePeriodEnd": Column(DATETIME, False),
    "ChargePeriodStart": Column(DATETIME, False),
    "ConsumedQuantity": Column(DECIMAL, True),
    "ConsumedUnit": Column(STRING, True),
    "ContractedCost": Column(DECIMAL, False),
    "ContractedUnitPrice": Column(DECIMAL, True),
    "EffectiveCost": Column(DECIMAL, False),
    "HostProviderName": Column(STRING, False),
    "InvoiceIssuerName": Column(STRING, False),
    "ListCost": Column(DECIMAL, False),
    "ListUnitPrice": Column(DECIMAL, True),
    "PricingCategory": Column(STRING, True, _allowed("Standard", "Dynamic", "Committed", "Other")),
    "PricingCurrency": Column(STRING, False),
    "PricingCurrencyContractedUnitPrice": Column(DECIMAL, True),
    "PricingCurrencyEffectiveCost": Column(DECIMAL, False),
    "PricingCurrencyListUnitPrice": Column(DECIMAL, True),
    "PricingQuantity": Column(DECIMAL, True),
    "PricingUnit": Column(STRING, True),
    "ResourceId": Column(STRING, True),
    "ResourceName": Column(STRING, True),
    "ResourceType": Column(STRING, True),
    "ServiceCategory": Column(STRING, False, SERVICE_CATEGORIES),
    "ServiceName": Column(STRING, False),
    "ServiceProviderName": Column(STRING, False),
    "ServiceSubcategory": Column(STRING, False, AI_SUBCATEGORIES),
    "SkuId": Column(STRING, True),
    "SkuMeter": Column(STRING, True),
    "SkuPriceDetails": Column(JSON, True),
    "SkuPriceId": Column(STRING, True),
    "SubAccountId": Column(STRING, True),
    "SubAccountName": Column(STRING, True),
    "SubAccountType": Column(STRING, True),
    "Tags": Column(JSON, True),
}
# Deprecated or renamed by 1.3/1.4: a 1.4 file carries their successors instead.
NOT_IN_14 = ("ProviderName", "PublisherName")

INVOICE_DETAIL = {
    "BilledCost": Column(DECIMAL, False),
    "BillingAccountId": Column(STRING, False),
    "BillingCurrency": Column(STRING, False),
    "BillingPeriodEnd": Column(DATETIME, False),
    "BillingPeriodStart": Column(DATETIME, False),
    "ChargeCategory": Column(STRING, False, CHARGE_CATEGORIES),
    "InvoiceDetailCreated": Column(DATETIME, False),
    "InvoiceDetailDescription": Column(STRING, True),
    "InvoiceDetailGrain": Column(JSON, True),
    "InvoiceDetailId": Column(STRING, False),
    "InvoiceDetailLastUpdated": Column(DATETIME, False),
    "InvoiceId": Column(STRING, False),
    "InvoiceIssueDate": Column(DATETIME, True),
    "InvoiceIssueStatus": Column(STRING, False, _allowed("Open", "Issued", "Voided")),
    "InvoiceIssuerName": Column(STRING, False),
    "PaymentCurrency": Column(STRING, False),
    "PaymentDueDate": Column(DATETIME, True),
    "PaymentTerms": Column(STRING, False),
    "ReferenceInvoiceId": Column(STRING, False),
}
GRAIN_KEYS = frozenset(
    {
        "ContractId", "RegionId", "ResourceId", "ResourceType", "ServiceName", "SkuId", "SkuMeter", "SkuPriceId",
        "SubAccountId",
    }
)  # fmt: skip
SKU_PRICE_KEYS = frozenset(
    {
        "CoreCount", "DiskMaxIops", "DiskSpace", "DiskType", "GpuCount", "InstanceType", "InstanceSeries",
        "MemorySize", "NetworkMaxIops", "NetworkMaxThroughput", "OperatingSystem", "Redundancy", "StorageClass",
    }
)  # fmt: skip
CURRENCIES = frozenset({"CNY", "USD", "EUR", "GBP", "JPY", "HKD", "SGD", "INR", "AUD", "CAD", "CHF", "KRW"})

NUMERIC = re.compile(r"^-?(0|[1-9]\d*)(\.\d+)?$")  # Numeric Format: no exponent, no '+', no thousands
# Date/Time Format: extended ISO 8601 in UTC, 'Z' at the end
DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
# Unit Format: '<plural-units>', '<singular-unit>-<plural-time-units>', '<plural-units>/<singular-time-unit>',
# each optionally after a whole-number quantity ('1000 Tokens'); capitalised as the attribute lists them
UNIT = re.compile(r"^([1-9]\d* )?[A-Z][A-Za-z]*(-[A-Z][a-z]+|/[A-Z][a-z]+)?$")
# Two minor units: a line is rounded to the cent once and shared out over its parts once.
PRODUCT_TOLERANCE = Decimal("0.02")


def _typed(column: str, spec: Column, value: str) -> str | None:
    if spec.type == DECIMAL:
        ok = bool(NUMERIC.match(value))
    elif spec.type == DATETIME:
        ok = bool(DATE_TIME.match(value))
    elif spec.type == JSON:
        try:
            ok = isinstance(json.loads(value), dict)
        except ValueError:
            ok = False
    else:
        ok = value == value.strip() and value != ""
    return None if ok else f"{column}: not {spec.type}: {value!r}"


def _columns(spec: dict[str, Column], header: list[str]) -> list[str]:
    found = [f"missing column {c}" for c in spec if c not in header]
    extra = [c for c in header if c not in spec and not c.startswith("x_")]
    found += [f"{c}: neither a FOCUS column nor x_-prefixed" for c in extra]
    return found


def _cells(spec: dict[str, Column], row: dict[str, str]) -> list[str]:
    found = []
    for column, rule in spec.items():
        value = row.get(column, "")
        if value == "":
            if not rule.nullable:
                found.append(f"{column}: null")
            continue
        problem = _typed(column, rule, value)
        if problem:
            found.append(problem)
        if rule.allowed is not None and value not in rule.allowed:
            found.append(f"{column}: {value!r} is not an allowed value")
    return found


def _d(row: dict[str, str], column: str) -> Decimal | None:
    try:
        return Decimal(row[column]) if row.get(column) else None
    except InvalidOperation:
        return None


def _when(row: dict[str, str], column: str) -> datetime | None:
    try:
        return datetime.fromisoformat(row[column].replace("Z", "+00:00")) if row.get(column) else None
    except ValueError:
        return None


def _periods(row: dict[str, str]) -> list[str]:
    found = []
    for start, end in (("ChargePeriodStart", "ChargePeriodEnd"), ("BillingPeriodStart", "BillingPeriodEnd")):
        s, e = _when(row, start), _when(row, end)
        if s is not None and e is not None and not s < e:
            found.append(f"{start} is not before {end}")
    return found


def _currencies(row: dict[str, str], columns: tuple[str, ...]) -> list[str]:
    return [f"{c}: {row[c]!r} is not a currency code" for c in columns if row.get(c) and row[c] not in CURRENCIES]


def _usage_not_null(row: dict[str, str]) -> list[str]:
    """Usage that is not a correction has a SKU, a price and quantities."""
    if row["ChargeCategory"] != "Usage" or row["ChargeClass"] == "Correction":
        return []
    needed = (
        "SkuId", "SkuPriceId", "PricingCategory", "ListUnitPrice", "ContractedUnitPrice", "PricingQuantity",
        "ConsumedQuantity", "PricingCurrencyListUnitPrice", "PricingCurrencyContractedUnitPrice",
    )  # fmt: skip
    return [f"{c}: null on usage that is not a correction" for c in needed if not row.get(c)]


def _pairs(row: dict[str, str]) -> list[str]:
    found = []
    for quantity, unit in (("ConsumedQuantity", "ConsumedUnit"), ("PricingQuantity", "PricingUnit")):
        if bool(row.get(quantity)) != bool(row.get(unit)):
            found.append(f"{unit} is null exactly when {quantity} is not")
        if row.get(unit) and not UNIT.match(row[unit]):
            found.append(f"{unit}: {row[unit]!r} is not in Unit Format")
    if row.get("SkuMeter") and not row.get("SkuId"):
        found.append("SkuMeter without SkuId")
    if row.get("SkuPriceDetails") and not row.get("SkuPriceId"):
        found.append("SkuPriceDetails without SkuPriceId")
    if row.get("SkuPriceDetails"):
        keys = json.loads(row["SkuPriceDetails"]).keys()
        found += [f"SkuPriceDetails: {k} is neither FOCUS-defined nor x_" for k in _unknown(keys, SKU_PRICE_KEYS)]
    if row["ChargeCategory"] not in ("Usage",) and row.get("ConsumedQuantity"):
        found.append("ConsumedQuantity on a charge that is not usage")
    return found


def _unknown(keys: Iterable[str], defined: frozenset[str]) -> list[str]:
    return [k for k in keys if k not in defined and not k.startswith("x_")]


def _costs(row: dict[str, str]) -> list[str]:
    found = []
    billed, effective = _d(row, "BilledCost"), _d(row, "EffectiveCost")
    if billed is not None and effective is not None and billed != effective:  # no commitments, no prepaid
        found.append("EffectiveCost differs from BilledCost without a commitment discount")
    correction = row["ChargeClass"] == "Correction"
    for cost, price in (("ListCost", "ListUnitPrice"), ("ContractedCost", "ContractedUnitPrice")):
        unit, quantity, amount = _d(row, price), _d(row, "PricingQuantity"), _d(row, cost)
        if unit is not None and unit < 0:
            found.append(f"{price} is negative")
        if unit is None and not correction and amount != billed:  # a charge without a unit price
            found.append(f"{cost} differs from BilledCost without a {price}")
        if None not in (unit, quantity, amount) and not correction:
            assert unit is not None and quantity is not None and amount is not None
            if abs(unit * quantity - amount) > PRODUCT_TOLERANCE:
                found.append(f"{cost} {amount} is not {price} x PricingQuantity ({unit} x {quantity})")
    same_currency = row.get("PricingCurrency") == row.get("BillingCurrency")
    if same_currency and _d(row, "PricingCurrencyEffectiveCost") != effective:
        found.append("PricingCurrencyEffectiveCost differs from EffectiveCost in the same currency")
    for price in ("PricingCurrencyListUnitPrice", "PricingCurrencyContractedUnitPrice"):
        unit = _d(row, price)
        if unit is not None and unit < 0:
            found.append(f"{price} is negative")
    return found


def _in_period(row: dict[str, str]) -> list[str]:
    if row["ChargeClass"] == "Correction":
        return []  # a correction may be of an earlier period's charge
    start, bstart = _when(row, "ChargePeriodStart"), _when(row, "BillingPeriodStart")
    bend = _when(row, "BillingPeriodEnd")
    if None in (start, bstart, bend):
        return []
    assert start is not None and bstart is not None and bend is not None
    return [] if bstart <= start < bend else ["ChargePeriodStart outside the billing period"]


def _skus(rows: list[dict[str, str]]) -> list[str]:
    """A SkuPriceId has one parent SkuId; a list price (Standard) is one price in one unit."""
    parents: dict[str, set[str]] = defaultdict(set)
    prices: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for row in rows:
        if row.get("SkuPriceId"):
            parents[row["SkuPriceId"]].add(row.get("SkuId", ""))
            if row.get("PricingCategory") == "Standard" and row["ChargeClass"] != "Correction":
                prices[row["SkuPriceId"]].add((row.get("PricingCurrencyListUnitPrice", ""), row.get("PricingUnit", "")))
    found = [f"SkuPriceId {p} has SkuIds {sorted(s)}" for p, s in parents.items() if len(s) > 1]
    return found + [f"SkuPriceId {p} has list prices {sorted(s)}" for p, s in prices.items() if len(s) > 1]


def cost_and_usage_violations(header: list[str], rows: list[dict[str, str]]) -> list[str]:
    """Every FOCUS 1.4 Cost and Usage requirement the rows break ([] when they conform)."""
    found = _columns(COST_AND_USAGE, header) + [f"deprecated column {c}" for c in NOT_IN_14 if c in header]
    found += _skus(rows)
    for i, row in enumerate(rows):
        problems = _cells(COST_AND_USAGE, row) + _periods(row)
        problems += _currencies(row, ("BillingCurrency", "PricingCurrency"))
        problems += _usage_not_null(row) + _pairs(row) + _costs(row) + _in_period(row)
        if row.get("ServiceSubcategory") in AI_SUBCATEGORIES and row.get("ServiceCategory") != AI:
            problems.append("ServiceSubcategory under another parent than its ServiceCategory")
        tags = json.loads(row["Tags"]) if row.get("Tags") else {}
        problems += [f"Tags: {k} holds a {type(v).__name__}" for k, v in tags.items() if isinstance(v, dict | list)]
        found += [f"row {i}: {p}" for p in problems]
    return found


def invoice_detail_violations(header: list[str], rows: list[dict[str, str]]) -> list[str]:
    """Every FOCUS 1.4 Invoice Detail requirement the rows break ([] when they conform)."""
    found = _columns(INVOICE_DETAIL, header)
    ids = [r.get("InvoiceDetailId") for r in rows]
    found += [f"InvoiceDetailId {i} is not unique" for i in sorted({i for i in ids if ids.count(i) > 1} - {None})]
    for i, row in enumerate(rows):
        problems = _cells(INVOICE_DETAIL, row) + _currencies(row, ("BillingCurrency", "PaymentCurrency"))
        s, e = _when(row, "BillingPeriodStart"), _when(row, "BillingPeriodEnd")
        if s is not None and e is not None and not s < e:
            problems.append("BillingPeriodStart is not before BillingPeriodEnd")
        if row.get("PaymentCurrency") and row["PaymentCurrency"] != row["BillingCurrency"]:
            problems.append("PaymentCurrency differs from BillingCurrency without PaymentCurrencyBilledCost")
        if row.get("ReferenceInvoiceId") != row.get("InvoiceId"):  # bills adjust no earlier invoice
            problems.append("ReferenceInvoiceId is not the row's own InvoiceId")
        created, updated = _when(row, "InvoiceDetailCreated"), _when(row, "InvoiceDetailLastUpdated")
        if created is not None and updated is not None and updated < created:
            problems.append("InvoiceDetailLastUpdated before InvoiceDetailCreated")
        if row.get("InvoiceDetailGrain"):
            keys = json.loads(row["InvoiceDetailGrain"]).keys()
            problems += [f"InvoiceDetailGrain: {k} is neither FOCUS-defined nor x_" for k in _unknown(keys, GRAIN_KEYS)]
        found += [f"row {i}: {p}" for p in problems]
    return found
