"""Logging filters of the web log (settings.LOGGING)."""

from __future__ import annotations

import logging


class RefusalWithoutTraceback(logging.Filter):
    """A page refused to someone (403) is an answer, not an error: django.request logs it as one
    warning line, without the PermissionDenied's traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
