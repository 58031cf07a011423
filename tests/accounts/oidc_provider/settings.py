"""A small OpenID Connect provider (django-oauth-toolkit) for the single sign-on tests: started
on loopback in a subprocess by tests/accounts/test_sso.py, with its own SQLite database. Its
users' groups are the `groups` claim; groups named `line:<name>` are the `business_lines` claim."""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = "provider-key-for-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.accounts.oidc_provider.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [HERE / "templates"]}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/login/"
# The platform runs on the same host (another port): cookies are per host, so other names.
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrftoken"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["OIDC_PROVIDER_KEY_FILE"]).read_text(),
    "OAUTH2_VALIDATOR_CLASS": "tests.accounts.oidc_provider.validator.GroupsValidator",
    "SCOPES": {"openid": "OpenID Connect", "email": "e-mail", "profile": "profile and groups"},
    "PKCE_REQUIRED": True,
}
# A fast hasher for its users' passwords and its client's secret (django-oauth-toolkit hashes it
# as a password): PBKDF2 costs half a second of a core a hash here, and a login hashes twice.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
