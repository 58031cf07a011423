"""Instrumentation for vLLM's OpenAI-compatible server: turns every request into a token
record v1 (docs/record-v1.schema.json) and hands it to the shipper's spool (collectors/).
Start vLLM with it through `python -m serving`; docs/serving.md says how it works."""
