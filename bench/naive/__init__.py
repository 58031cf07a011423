"""The comparison path of the benchmark: a straightforward DRF ModelSerializer + ORM ingest.

Not part of the product. It validates the same token record v1 fields (types, ranges, the
cross-field rules) and stores each record as one ORM row, the way a first version would.
"""
