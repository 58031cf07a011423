"""The ingest benchmark (bench/ingest.py) and its comparison path (bench/naive)."""
