"""Collectors: programs that send token records to the ingest API over HTTP.

They run next to the serving stack, not inside the platform: standard library only, and
never an import of Django or of the platform's apps.
"""
