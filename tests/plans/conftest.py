from __future__ import annotations

from tests.ledger.conftest import as_role  # noqa: F401 (the role clients of the books' tests)
