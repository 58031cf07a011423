"""Settings for the benchmark server: the product's settings plus the comparison app (bench.naive).

The middleware, authentication and database settings are the product's; only an app and one
URL are added, so the real ingest API runs exactly as it does in production.
"""

from __future__ import annotations

from costplatform.settings import *  # noqa: F403
from costplatform.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.naive"]
ROOT_URLCONF = "bench.urls"
# The comparison path reads its body through DRF's JSON parser.
DATA_UPLOAD_MAX_MEMORY_SIZE = None
