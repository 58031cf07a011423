"""The stages composed where one statement must write across them, for speed.

Ingest stores a batch and classification adds it to the class rollup in the same statement
(apps.classification.ingest.CLASSES, a `Companion` of apps.ingest.services). Neither stage
imports the other's writes: this package, above both, hands the companion to ingest, and the
records API (`POST /api/v1/records`, mounted by `urls`) and every caller that ingests records
as the product does go through it. Nothing else lives here.
"""
