"""`POST /api/v1/records` with classification composed in (the rest of the ingest API is
apps.ingest.api.urls)."""

from __future__ import annotations

from django.urls import path

from apps.ingest.api.views import RecordsView
from apps.pipeline.records import batch_ingest

urlpatterns = [path("records", RecordsView.as_view(ingest=batch_ingest), name="records")]
