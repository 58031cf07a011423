"""Small helpers that read typed settings from the environment."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit


def env(name: str, default: str = "") -> str:
    """A string setting; `NAME_FILE` (a path) wins over `NAME`, for secrets mounted as files."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def envint(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url: str) -> dict[str, object]:
    """Django DATABASES entry from `postgresql://user:pass@host:port/name?host=/socket/dir`."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, got scheme {parts.scheme!r}")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = query.pop("host", None) or (unquote(parts.hostname) if parts.hostname else "")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "OPTIONS": query,
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }


def replica_database(url: str) -> dict[str, object]:
    """The `replica` DATABASES entry (costplatform/routers.py): a short connect timeout, so that a
    dead replica costs little, and in tests a mirror of the primary's test database."""
    entry = database_from_url(url)
    entry["OPTIONS"] = {"connect_timeout": "2"} | entry["OPTIONS"]  # type: ignore[operator]
    return entry | {"TEST": {"MIRROR": "default"}}
