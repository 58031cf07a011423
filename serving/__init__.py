"""Instrumentation for vLLM's OpenAI-compatible server: turns every request into a token
record v1 and hands it to collectors/. Not built yet; the record contract it will speak is
docs/record-v1.schema.json."""
