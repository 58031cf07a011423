"""The page of an app above the currencies that the rates page links to (the finance page),
registered by that app under the currencies' own name for it (apps.common.links)."""

from __future__ import annotations

from apps.common.links import PageLinks

PAGES = PageLinks("the currencies", ("finance",))
