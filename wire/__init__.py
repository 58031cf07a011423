"""The wire format and its transport, shared by the edge: the token record v1, defined once
(contract, which the platform decodes with), the record builder and the prompt hash (record),
the one request pipeline every edge runs (edge), the attribution policy (attribution), the
hard-budget gate (budgets), the durable spool, the shipper and the one HTTP sender (spool,
shipper, send) and the keys they read (keys).

`serving/` (inside vLLM) and `collectors/` (proxy, OTLP receiver, /metrics reconciliation,
command lines) both build on this package and never import each other; this package imports
neither of them, nor Django (the import contracts in pyproject.toml hold it)."""
