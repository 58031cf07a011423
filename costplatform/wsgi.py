from __future__ import annotations

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costplatform.settings")

application = get_wsgi_application()

# What is loaded by now (Django, the apps, their modules) lives as long as the worker: moved out
# of the cyclic collector's reach, so its full collections, which an ingest batch's many
# surviving tuples trigger every few requests, no longer walk it (a few us a record of ingest).
gc.freeze()
