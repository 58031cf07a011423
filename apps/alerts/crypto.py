"""Channel secrets at rest: Fernet with a key derived from SECRET_KEY.

Webhook URLs of Slack, WeCom and DingTalk carry their token, so URLs are encrypted too.
Rotating SECRET_KEY makes stored secrets unreadable: the channel then fails permanently and
says so on its page, and an admin enters the secret again.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models

log = logging.getLogger(__name__)
UNREADABLE = "\x00unreadable"


def _fernet() -> Fernet:
    digest = hashlib.sha256(b"costplatform.alerts.channel-secret\x00" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(plain: str) -> str:
    return _fernet().encrypt(plain.encode()).decode() if plain else ""


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        log.warning("a channel secret cannot be decrypted (was SECRET_KEY changed?)")
        return UNREADABLE


class EncryptedTextField(models.TextField):
    """A text column holding Fernet tokens; Python code only ever sees the plain text."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str:
        return decrypt(value or "")

    def get_prep_value(self, value: Any) -> str:
        return encrypt(str(value or ""))
