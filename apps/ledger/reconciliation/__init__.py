"""Bill reconciliation: a supplier's monthly bill imported through its column mapping
(imports.py), matched against the platform's priced rollups or pool costs by accounting day
and model (matching.py), its differences explained by adjusting entries a second finance user
posts (adjustments.py), and the month-end finding over a threshold (findings.py).

The models live in models.py and are loaded with the ledger's (apps/ledger/models.py)."""
