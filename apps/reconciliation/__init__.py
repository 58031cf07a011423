"""Bill reconciliation: a supplier's monthly bill imported through its column mapping
(imports.py), matched against the platform's priced rollups or pool costs by accounting day
and model (matching.py), its differences explained by adjusting entries a second finance user
posts (adjustments.py), and the month-end finding over a threshold (findings.py).

Built on the books: it reads the priced rollups and posts adjusting entries to the journal. Its
month-end check and its line of the close checklist are registered with the books in apps.py."""
