"""Which FOCUS export to write: the version (1.4 by default, 1.2 kept) and the dataset (cost
and usage; Invoice Detail, new in 1.4)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

VERSIONS = ("1.4", "1.2")
DEFAULT_VERSION = "1.4"
DATASETS = ("cost-and-usage", "invoice-detail")
NO_INVOICE_DETAIL = "Invoice Detail is a FOCUS 1.4 dataset: ask for --focus-version 1.4"


class FocusChoiceError(ValueError):
    pass


def focus_export(
    *, month: date, version: str = DEFAULT_VERSION, dataset: str = DATASETS[0], business_lines: list[str] | None = None
) -> Iterator[str]:
    """The CSV text of a billing period's FOCUS dataset, a chunk at a time (header first)."""
    if version not in VERSIONS:
        raise FocusChoiceError(f"unknown FOCUS version {version!r}: one of {', '.join(VERSIONS)}")
    if dataset not in DATASETS:
        raise FocusChoiceError(f"unknown FOCUS dataset {dataset!r}: one of {', '.join(DATASETS)}")
    if dataset == "invoice-detail":
        if version != "1.4":
            raise FocusChoiceError(NO_INVOICE_DETAIL)
        from apps.exports.invoice_detail import invoice_detail_csv

        return invoice_detail_csv(month=month)
    if version == "1.2":
        from apps.exports.focus import focus_csv

        return focus_csv(month=month, business_lines=business_lines)
    from apps.exports.focus14 import focus14_csv

    return focus14_csv(month=month, business_lines=business_lines)
