from __future__ import annotations

from django.urls import path

from bench.naive.views import NaiveBulkRecordsView, NaiveRecordsView
from costplatform.urls import urlpatterns as product_urlpatterns

urlpatterns = [
    *product_urlpatterns,
    path("bench/naive/records", NaiveRecordsView.as_view(), name="bench-naive-records"),
    path("bench/naive/records-bulk", NaiveBulkRecordsView.as_view(), name="bench-naive-records-bulk"),
]
