"""The import contracts of pyproject.toml ([tool.importlinter]): the edge (serving/, collectors/)
meets only in wire/ and never imports Django or the apps, wire/ imports none of its users,
apps.common imports no other app, no product package imports the tooling (devtools/), and the
apps import only the ones before them in the record's way (common, auditlog, accounts, ingest,
classification, pricing, currencies, the books (ledger), plans and reconciliation side by side, the
readers, pipeline). The same check as `make lint`, in the
suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_import_contract_is_kept() -> None:
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(linter), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
    assert "the record flows one way: no app imports one downstream of it KEPT" in done.stdout
