"""The dashboards' tests share the site-wide page fixtures of tests/conftest.py (traffic,
as_user); these names stay importable from here for the tests that import them."""

from __future__ import annotations

from tests.conftest import T0, login_as, month_like_records, priced

__all__ = ["T0", "login_as", "month_like_records", "priced"]
