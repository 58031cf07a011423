"""The migrations describe the models as they are: a model changed (or moved between apps)
without its migration would leave a fresh database different from the code, found only when
a query fails. `makemigrations --check` writes nothing and fails on any change it would make."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_every_model_change_has_its_migration() -> None:
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits 1 with the migrations it would write
        pytest.fail(f"models without their migrations:\n{out.getvalue()}" if exc.code else out.getvalue())
    assert "No changes detected" in out.getvalue()
