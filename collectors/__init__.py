"""Collectors: programs that move token records to the ingest API over HTTP.

They run next to the serving stack, not inside the platform, and never import Django or
the platform's apps. The spool, the shipper and the /metrics reconciliation need only the
standard library, msgspec and prometheus_client; the OTLP receiver and the proxy also
aiohttp and opentelemetry-proto, and the proxy's token metrics the OpenTelemetry SDK and its
OTLP/HTTP exporter (the `collectors` extra).
"""
