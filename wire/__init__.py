"""The wire format and its transport, shared by the edge: the token record builder and the
prompt hash (record), the attribution policy (attribution), the durable spool, the shipper and
the batch sender (spool, shipper, send) and the keys they read (keys).

`serving/` (inside vLLM) and `collectors/` (proxy, OTLP receiver, /metrics reconciliation,
command lines) both build on this package and never import each other; this package imports
neither of them, nor Django (the import contracts in pyproject.toml hold it)."""
