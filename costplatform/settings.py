"""Settings, all from the environment (see README "Settings")."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from costplatform.env import database_from_url, env, envbool, envint, envlist, replica_database
from costplatform.schedules import BEAT_SCHEDULE

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env("COSTPLATFORM_DATA_DIR", str(BASE_DIR / ".data"))).resolve()

DEBUG = envbool("DEBUG", False)
SECRET_KEY = env("SECRET_KEY") or ("insecure-development-key" if DEBUG else "")
if not SECRET_KEY:
    # A stable per-installation key for the embedded set-up; production sets SECRET_KEY.
    _key_file = DATA_DIR / "secret_key"
    if not _key_file.exists():
        import secrets

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        _key_file.write_text(secrets.token_urlsafe(50))
        _key_file.chmod(0o600)
    SECRET_KEY = _key_file.read_text().strip()
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "apps.common",
    "apps.accounts",
    "apps.ingest",
    "apps.classification",
    "apps.pricing",
    "apps.currencies",
    "apps.ledger",
    "apps.plans",
    "apps.reconciliation",
    "apps.exports",
    "apps.finance",
    "apps.alerts",
    "apps.audits",
    "apps.dashboards",
    "apps.auditlog",
    "apps.metrics",
    "costplatform",  # manage.py db_roles, and migrate as the database owner (costplatform/dbroles.py)
    "devtools",  # manage.py demo_data (devtools/demo_data.py); no models, no URLs
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "costplatform.middleware.refuse_nul_in_query",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "costplatform.middleware.display_zone",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "apps.auditlog.context.audit_context_middleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # GETs of the views marked @replica_view read from the replica when one is configured (below).
    "costplatform.middleware.ReplicaPages",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "apps.common.csp.content_security_policy",
    # Last: turns a lockout found during authentication into the 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "costplatform.urls"
WSGI_APPLICATION = "costplatform.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.template.context_processors.i18n",
                "django.contrib.messages.context_processors.messages",
                "costplatform.context_processors.data_age",
                "costplatform.context_processors.nav",
                "costplatform.context_processors.opened_alert",
                "costplatform.context_processors.scope_notice",
            ],
            # Times in the reader's display zone on every page: `when`, `display_zone`.
            "builtins": ["apps.common.templatetags.display"],
        },
    },
]

# The app connects as DATABASE_URL's role; migrations as DATABASE_OWNER_URL's when set
# (costplatform/dbroles.py). The embedded server sets up both: its superuser and costplatform_app.
DATABASE_URL = env("DATABASE_URL")
DATABASE_OWNER_URL = env("DATABASE_OWNER_URL")
if not DATABASE_URL:
    from costplatform.embedded import embedded_database_urls

    DATABASE_URL, DATABASE_OWNER_URL = embedded_database_urls(DATA_DIR)
DATABASES = {"default": database_from_url(DATABASE_URL)}
if DATABASE_OWNER_URL:
    DATABASES["owner"] = database_from_url(DATABASE_OWNER_URL) | {"TEST": {"MIRROR": "default"}}
# Behind a pooler in transaction mode (PgBouncer, docs/scaling.md) a server-side cursor held over
# several transactions (QuerySet.iterator() outside one) would meet another server connection.
if envbool("COSTPLATFORM_DB_TRANSACTION_POOLING", False):
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
# A hot standby for page and report reads (costplatform/routers.py, docs/scaling.md): used while
# its replay lag is at most REPLICA_MAX_LAG_SECONDS, measured at most every REPLICA_CHECK_SECONDS
# a process; a page read from it says how old its figures are from REPLICA_NOTICE_SECONDS on.
DATABASE_REPLICA_URL = env("DATABASE_REPLICA_URL")
REPLICA_MAX_LAG_SECONDS = float(env("COSTPLATFORM_REPLICA_MAX_LAG_SECONDS", "30"))
REPLICA_CHECK_SECONDS = float(env("COSTPLATFORM_REPLICA_CHECK_SECONDS", "3"))
REPLICA_NOTICE_SECONDS = float(env("COSTPLATFORM_REPLICA_NOTICE_SECONDS", "5"))
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = replica_database(DATABASE_REPLICA_URL)
    DATABASE_ROUTERS = ["costplatform.routers.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

MIGRATION_MODULES = {
    "common": "migrations.common",
    "accounts": "migrations.accounts",
    "ingest": "migrations.ingest",
    "classification": "migrations.classification",
    "pricing": "migrations.pricing",
    "currencies": "migrations.currencies",
    "ledger": "migrations.ledger",
    "plans": "migrations.plans",
    "reconciliation": "migrations.reconciliation",
    "alerts": "migrations.alerts",
    "audits": "migrations.audits",
    "auditlog": "migrations.auditlog",
    "dashboards": "migrations.dashboards",
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# Password guessing: django-axes counts failed logins of the login page, the
# admin's and HTTP basic auth, and after COSTPLATFORM_LOGIN_FAILURE_LIMIT of them refuses that
# username, the right password included, for COSTPLATFORM_LOGIN_COOLOFF_MINUTES. By username, not
# address: behind the TLS proxy every client has the proxy's address. apps/auditlog/lockouts.py
# writes each lockout to the audit log.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    "apps.accounts.sso.SsoBackend",  # inert unless single sign-on is configured (below)
]
AXES_FAILURE_LIMIT = envint("COSTPLATFORM_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=envint("COSTPLATFORM_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username"]
# axes.W006 asks for the address among the parameters, for locks on combinations that rotating the
# User-Agent escapes; a lock on the username alone counts every attempt at it, whatever the client.
SILENCED_SYSTEM_CHECKS = ["axes.W006"]
AXES_RESET_ON_SUCCESS = True
# Attempts during the lock are refused, not counted: the lock ends on time (and each is not a new lockout).
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# Lockouts are read in the audit log and lifted with `manage.py axes_reset_username`; axes' own
# admin pages would be unscoped.
AXES_ENABLE_ADMIN = False

# Single sign-on (OpenID Connect, apps/accounts/sso.py, docs/security.md): on when the issuer and
# client id are set. The endpoints come from the issuer's discovery document. The roles claim
# holds group names, mapped to roles by COSTPLATFORM_OIDC_GROUP_ROLES ("idp-group=role,...";
# empty: groups named as a role); the lines claim lists the business lines (absent: all).
OIDC_ISSUER = env("COSTPLATFORM_OIDC_ISSUER").rstrip("/")
OIDC_RP_CLIENT_ID = env("COSTPLATFORM_OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env("COSTPLATFORM_OIDC_CLIENT_SECRET")
OIDC_PROVIDER_NAME = env("COSTPLATFORM_OIDC_PROVIDER_NAME", "single sign-on")
OIDC_ROLES_CLAIM = env("COSTPLATFORM_OIDC_ROLES_CLAIM", "groups")
OIDC_LINES_CLAIM = env("COSTPLATFORM_OIDC_LINES_CLAIM", "business_lines")
# The value of the lines claim that gives every business line; a claim absent, empty or without
# it gives only the lines it names, and no line at all refuses the login (fail closed).
OIDC_ALL_LINES = env("COSTPLATFORM_OIDC_ALL_LINES", "*")
OIDC_GROUP_ROLES = dict(item.split("=", 1) for item in envlist("COSTPLATFORM_OIDC_GROUP_ROLES", []) if "=" in item)
OIDC_RP_SCOPES = env("COSTPLATFORM_OIDC_SCOPES", "openid email profile")
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10
LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=refused"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
# Pages in English and Simplified Chinese (locale/), chosen by the browser or the switch in the header.
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True
# The accounting time zone (IANA name): the boundaries of accrual days, periods, budgets,
# revenue months, month-end checks, monthly audits and every page's day and month. Hourly
# rollups stay in UTC hours, so its offset must be whole hours (checked: costplatform.E001).
# UTC by default so existing books keep their months; see docs/ledger.md before changing it.
ACCOUNTING_TZ = env("COSTPLATFORM_ACCOUNTING_TZ", "UTC")
# The ledger's functional currency: the journal, trial balance and FOCUS BillingCurrency are in
# it; costs priced in another are booked at the day's rate (docs/currencies.md).
LEDGER_FUNCTIONAL_CURRENCY = env("COSTPLATFORM_FUNCTIONAL_CURRENCY", "CNY")

# The Parquet export (manage.py export_parquet --to s3://...) to an S3-compatible store such as
# MinIO or Ceph: its endpoint (path-style addressing). Empty: AWS S3. Credentials: boto3's AWS_*.
WAREHOUSE_S3_ENDPOINT_URL = env("COSTPLATFORM_S3_ENDPOINT_URL")
# Where each closed month's Parquet files go once it is closed (a directory or s3://bucket/prefix);
# empty: only by hand (manage.py export_parquet).
WAREHOUSE_EXPORT_TO = env("COSTPLATFORM_WAREHOUSE_EXPORT_TO")

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# Production behind a TLS-terminating proxy: HTTPS=true turns on every setting below (each
# can be overridden); `manage.py check --deploy` is then clean (docs/security.md).
HTTPS = envbool("HTTPS", False) and not DEBUG
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", HTTPS)
# Health probes and Prometheus scrapes often come over plain HTTP from inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
# The proxy must set X-Forwarded-Proto (and drop one sent by the client).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if envbool("SECURE_PROXY_SSL_HEADER", HTTPS) else None
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", HTTPS)
# Django's defaults, stated because the tests and docs rely on them.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    # A login reads nothing without a role; views needing more name their own permissions.
    "DEFAULT_PERMISSION_CLASSES": ["apps.accounts.roles.IsReader"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "costplatform API",
    "DESCRIPTION": (
        "Token records in, usage out. Token counts follow the inclusive convention: "
        "`tokens.prompt` counts all prompt tokens, the cached ones included; "
        "`tokens.prompt_cached` is the cached part of it."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Several models have a field named "action"; name each choice set after its model.
    "ENUM_NAME_OVERRIDES": {
        "RuleActionEnum": "apps.classification.models.Rule.Action",
        "LedgerFindingActionEnum": "apps.ledger.models.Finding.Action",
    },
    # The error answers (400, 401, 403, 404, 415 ...) each operation can give: costplatform/openapi.py.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "costplatform.openapi.add_error_responses",
    ],
}

# Celery: a real broker when CELERY_BROKER_URL is set, else a filesystem queue under the data dir.
CELERY_BROKER_URL = env("CELERY_BROKER_URL")
if not CELERY_BROKER_URL:
    from costplatform.embedded import filesystem_broker

    CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_broker(DATA_DIR)
elif env("CELERY_BROKER_TRANSPORT_OPTIONS"):
    # JSON, e.g. {"visibility_timeout": 3600}: on Redis a task whose worker died before acknowledging
    # it is delivered again once this many seconds have passed since its delivery (docs/reliability.md).
    CELERY_BROKER_TRANSPORT_OPTIONS = json.loads(env("CELERY_BROKER_TRANSPORT_OPTIONS"))
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND") or None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = BEAT_SCHEDULE
# Named queues, one per stage (costplatform/queues.py): each task to its stage's queue, workers -Q.
if envbool("COSTPLATFORM_TASK_QUEUES", False):
    from costplatform.queues import TASK_ROUTES as CELERY_TASK_ROUTES  # noqa: F401
# Beat keeps its schedule in the database: every entry above is editable in the admin (Periodic tasks).
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"

# Ingest limits (see docs/ingest.md).
# The rules: try page classifies this many of the newest records unless asked for hours.
RULES_TRY_RECORDS = envint("COSTPLATFORM_RULES_TRY_RECORDS", 10_000)
INGEST_MAX_BYTES = envint("COSTPLATFORM_INGEST_MAX_BYTES", 10 * 1024 * 1024)
INGEST_MAX_RECORDS = envint("COSTPLATFORM_INGEST_MAX_RECORDS", 50_000)
# Seconds a client may take to send an ingest body before it is answered 408 (a trickling client
# would otherwise hold a gunicorn sync worker until its --timeout kills it); 0 turns it off.
INGEST_BODY_TIMEOUT = envint("COSTPLATFORM_INGEST_BODY_TIMEOUT", 30)
INGEST_MAX_AGE_DAYS = envint("COSTPLATFORM_INGEST_MAX_AGE_DAYS", 3 * 366)
# Per collector key rate limits (apps/ingest/ratelimit.py; 0 = off), overridable on each key in
# the admin; a key may spend BURST_SECONDS of its rate at once.
INGEST_RATE_REQUESTS = envint("COSTPLATFORM_RATE_REQUESTS", 1_000)
INGEST_RATE_RECORDS = envint("COSTPLATFORM_RATE_RECORDS", 100_000)
INGEST_RATE_BURST_SECONDS = envint("COSTPLATFORM_RATE_BURST_SECONDS", 10)
# Dims kept in the hourly rollups; per-user or per-conversation dims stay on the records only.
# `caller` is the edges' name of who called (wire/attribution.py): caller budgets read it here.
ROLLUP_DIMS = envlist(
    "COSTPLATFORM_ROLLUP_DIMS", ["business_line", "team", "caller", "project", "feature", "step", "env"]
)
PARTITIONS_AHEAD_MONTHS = envint("COSTPLATFORM_PARTITIONS_AHEAD_MONTHS", 2)
# Retention (docs/reliability.md): raw records of this month and the N months before it are kept,
# older monthly partitions dropped whole (0 = keep forever); rollups and the ledger are kept forever.
RETENTION_MONTHS = envint("COSTPLATFORM_RETENTION_MONTHS", 13)
REJECTIONS_RETENTION_DAYS = envint("COSTPLATFORM_REJECTIONS_RETENTION_DAYS", 90)
# Late records of an hour still arrive this long after it ends; pool costs are allocated after that.
POOL_GRACE_MINUTES = envint("COSTPLATFORM_POOL_GRACE_MINUTES", 5)
# A hosted models' price list to re-import daily (docs/pricing.md, "A public price list"): a path or
# an http(s) URL, LiteLLM's JSON or a CSV; the served models are taken, and these names or globs.
PRICE_LIST = env("COSTPLATFORM_PRICE_LIST", "")
PRICE_LIST_MODELS = envlist("COSTPLATFORM_PRICE_LIST_MODELS", [])

# Alerts (see docs/alerts.md). Links in messages are made absolute with the site URL.
ALERTS_SITE_URL = env("COSTPLATFORM_SITE_URL", "http://localhost:8000")
# CIDRs that channel URLs may reach although private or loopback (tests, on-premises chat servers).
ALERTS_OUTBOUND_ALLOW = envlist("COSTPLATFORM_OUTBOUND_ALLOW", [])
ALERTS_HTTP_TIMEOUT = float(env("COSTPLATFORM_ALERTS_HTTP_TIMEOUT", "10"))
# Seconds before each retry of a failed delivery; attempts = len + 1.
# How often every rule is evaluated (seconds); the beat entry and each task's expiry use it.
ALERTS_EVALUATE_EVERY = envint("COSTPLATFORM_ALERTS_EVALUATE_EVERY", 30)
ALERTS_RETRY_DELAYS = [float(s) for s in envlist("COSTPLATFORM_ALERTS_RETRY_DELAYS", ["30", "120", "600", "1800"])]
# Email channels: SMTP when EMAIL_HOST (or another EMAIL_BACKEND) is set; without either, a local
# mailbox, each message a file under the data dir, as the database and the broker fall back to local ones.
EMAIL_HOST = env("EMAIL_HOST")
EMAIL_BACKEND = env("EMAIL_BACKEND") or (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.filebased.EmailBackend"
)
EMAIL_FILE_PATH = str(DATA_DIR / "mail")
EMAIL_HOST = EMAIL_HOST or "localhost"
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "costplatform@localhost")

# /metrics (see docs/metrics.md): a bearer token or a client address in the allow-list; labels
# keep the top N business lines and models (by tokens over 24 h), the rest as "other".
METRICS_TOKEN = env("COSTPLATFORM_METRICS_TOKEN")
METRICS_ALLOW = envlist("COSTPLATFORM_METRICS_ALLOW", ["127.0.0.1/32", "::1/128"])
# Behind the TLS proxy every client has the proxy's address: there only the token serves a scrape.
METRICS_REQUIRE_TOKEN = envbool("COSTPLATFORM_METRICS_REQUIRE_TOKEN", HTTPS)
METRICS_TOP_BUSINESS_LINES = envint("COSTPLATFORM_METRICS_TOP_BUSINESS_LINES", 20)
METRICS_TOP_MODELS = envint("COSTPLATFORM_METRICS_TOP_MODELS", 10)
METRICS_CACHE_SECONDS = envint("COSTPLATFORM_METRICS_CACHE_SECONDS", 15)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    # urllib3's DEBUG lines carry request paths and query strings, which hold chat webhook
    # tokens (Slack, DingTalk, WeCom): never below INFO, whatever LOG_LEVEL says.
    "filters": {"refusals": {"()": "costplatform.logfilters.RefusalWithoutTraceback"}},
    "loggers": {"urllib3": {"level": "INFO"}, "django.request": {"filters": ["refusals"]}},
}
