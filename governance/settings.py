"""Settings, read from environment variables only.

With no variable set you get the embedded default: SQLite under var/, Celery tasks run in-process,
DEBUG on and a secret generated once into var/. DATABASE_URL and CELERY_BROKER_URL switch to
PostgreSQL and a real broker.
"""

import secrets
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from collectors.mig import mig_extra_parse

# Celery and the periodic schedule, the REST API, efficiency rules and notifications: one module each under conf/.
from governance.conf.api import *  # noqa: F403
from governance.conf.celery import *  # noqa: F403
from governance.conf.findings import *  # noqa: F403
from governance.conf.oidc import *  # noqa: F403
from governance.conf.oidc import OIDC_ENABLED
from governance.conf.remediation import *  # noqa: F403
from governance.lib.env import database_from_url, env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", True)


def _secret_key() -> str:
    key = env_str("SECRET_KEY")
    if key:
        return key
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"] if DEBUG else [])
if not DEBUG and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must be set when DEBUG is off")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Set when a TLS-terminating proxy in front sets X-Forwarded-Proto and appends to X-Forwarded-For.
TLS_PROXY_TRUSTED = env_bool("TLS_PROXY_TRUSTED", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "governance.org",
    "governance.fleet",
    "governance.usage",
    "governance.costs",
    "governance.efficiency",
    "governance.remediation",
    "governance.notify",
    "governance.schedule",
    "governance.api",
    "governance.dashboard",
]

MIDDLEWARE = [
    "governance.usage.health.ProbeMiddleware",
    # Before anything reads the database (the session, the user): picks where this request's reads go.
    "governance.lib.replica.ReplicaReadMiddleware",
    # A read-only request's repeated questions (is this month closed?) asked of the database once.
    "governance.lib.memo.ReadMemoMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Pages, JSON and CSV compressed (with Django's BREACH mitigation); static files come precompressed from
    # WhiteNoise above, so they never pass through it.
    "django.middleware.gzip.GZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A signed-in user reads the primary while their last write (in any browser) is not on the replica yet.
    "governance.lib.replica.ReplicaUserMarkMiddleware",
    "governance.api.middleware.AuditDoorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "governance.urls"
WSGI_APPLICATION = "governance.wsgi.application"
AUTH_USER_MODEL = "org.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:overview"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL")
DATABASES: dict[str, dict[str, Any]] = {
    "default": database_from_url(DATABASE_URL)
    if DATABASE_URL
    else {"ENGINE": "django.db.backends.sqlite3", "NAME": VAR_DIR / "governance.sqlite3", "OPTIONS": {"timeout": 30}}
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Without it, connecting to a database host that is gone waits for the kernel's TCP timeout (minutes).
    DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT_S", 3))
# Pages may read a PostgreSQL streaming replica of the primary (governance/lib/replica.py): a user reads their own
# writes from the primary until the replica has replayed them.
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL")
if DATABASE_REPLICA_URL:
    if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_REPLICA_URL needs DATABASE_URL to name the PostgreSQL primary")
    DATABASES["replica"] = database_from_url(DATABASE_REPLICA_URL)
    DATABASES["replica"]["OPTIONS"].setdefault("connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT_S", 3))
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    DATABASE_ROUTERS = ["governance.lib.replica.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Throttle counters (API rates, invalid bearer tokens) are shared by every web worker and process: in the database
# (table api_ratecount, one atomic upsert a request: governance/api/counters.py) unless CACHE_URL (or REDIS_URL)
# names a Redis database of its own, which takes that load off the database; the cache itself is table gg_cache
# (made by the api app's migrations) or that Redis database. The replica's read-your-writes marks of signed-in users
# are kept on the primary whichever it is (api.WriteMark: one upsert that only moves a mark forward).
CACHE_URL = env_str("CACHE_URL") or env_str("REDIS_URL")
if CACHE_URL and not CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(f"CACHE_URL {CACHE_URL!r} is not a Redis URL (redis://host:6379/1)")
CACHES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    if CACHE_URL
    # Culling past MAX_ENTRIES would forget live counters: far more than the clients of one minute.
    else {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "gg_cache",
        "OPTIONS": {"MAX_ENTRIES": 50_000},
    }
}

# --- Sign-in ------------------------------------------------------------------------------------
# django-axes first: it refuses a locked-out user and address before any backend checks a password.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
# Failed sign-ins are counted per username and address (in the database, so every process counts together).
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The client address: the peer, or behind a trusted proxy the address it appended to X-Forwarded-For. A header
# nobody vouches for is never read, or one client could count as many.
AXES_IPWARE_PROXY_COUNT = 1 if TLS_PROXY_TRUSTED else None
AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"] if TLS_PROXY_TRUSTED else ["REMOTE_ADDR"]

# OpenID Connect single sign-on beside local accounts (governance/conf/oidc.py): on when OIDC_RP_CLIENT_ID is set.
if OIDC_ENABLED:
    INSTALLED_APPS.append("mozilla_django_oidc")
    AUTHENTICATION_BACKENDS.append("governance.org.oidc.GovernanceOIDCBackend")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
# Static files come from the finders too, so pages are served without a collectstatic step.
WHITENOISE_USE_FINDERS = True
# Hashed names (cached for a year, immutable) and gzip/brotli copies: on by default with DEBUG off; `make run`
# turns it on with DEBUG too, after collectstatic. Off, pages link the plain names (no collectstatic needed).
STATIC_MANIFEST = env_bool("STATIC_MANIFEST", not DEBUG)
WHITENOISE_MAX_AGE = 365 * 24 * 3600 if STATIC_MANIFEST else 60
WHITENOISE_AUTOREFRESH = DEBUG and not STATIC_MANIFEST
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "governance.lib.staticstorage.HashedStaticFilesStorage"
        if STATIC_MANIFEST
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        # Preloading is a promise to browsers that is slow to take back; a deployment opts in.
        SILENCED_SYSTEM_CHECKS = ["security.W021"]
if TLS_PROXY_TRUSTED:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content-Security-Policy: scripts and everything else from this site only. Figures are JSON blocks
# (json_script) drawn by static/js/charts.js; plotly.js sets inline styles and draws images from data: URLs.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
if OIDC_ENABLED:
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"] += OIDC_FORM_ACTION  # noqa: F405

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-governance@localhost")

# --- Domain -------------------------------------------------------------------------------------
# Largest ingest body accepted, after decompression.
INGEST_MAX_BODY_BYTES = env_int("INGEST_MAX_BODY_BYTES", 32 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = INGEST_MAX_BODY_BYTES
# Ingest accepts records dated from the retention horizon (SAMPLE_RETENTION_DAYS; when that is 0, this many days;
# job times always this many days) until this many minutes ahead of the server's clock: a date far off would make
# partition maintenance fail ("year 10000") or fold readings into hours nobody can bill.
INGEST_MAX_AGE_DAYS = env_int("INGEST_MAX_AGE_DAYS", 400)
INGEST_MAX_FUTURE_MINUTES = env_int("INGEST_MAX_FUTURE_MINUTES", 10)
# A batch the worker fails to process this many times is dead: kept with its error, never swept again, shown to
# admins, re-queued by an admin (Django admin action).
INGEST_MAX_ATTEMPTS = env_int("INGEST_MAX_ATTEMPTS", 5)
# MIG profiles beyond NVIDIA's published ones (collectors/mig.py): 'name=slices/total:mem_gib' pairs,
# comma-separated, e.g. "1g.24gb=1/4:24,2g.48gb=2/4:48". Ingest refuses a sample whose profile neither knows.
try:
    MIG_EXTRA_PROFILES = mig_extra_parse(env_str("MIG_EXTRA_PROFILES"))
except ValueError as exc:
    raise ImproperlyConfigured(f"MIG_EXTRA_PROFILES: {exc}") from None
# The fleet grows by evidence: samples naming more GPUs than this on one node (a MIG instance counts 1/7) are
# refused, and so are a batch's records on new GPUs beyond what one token may introduce per cluster in an hour.
FLEET_MAX_GPUS_PER_NODE = env_int("FLEET_MAX_GPUS_PER_NODE", 16)
FLEET_MAX_NEW_GPUS_PER_TOKEN_HOUR = env_int("FLEET_MAX_NEW_GPUS_PER_TOKEN_HOUR", 64)
# A GPU averaging under this SM utilisation (percent) in a sample counts as idle.
GOVERNANCE_IDLE_SM_PERCENT = env_float("GOVERNANCE_IDLE_SM_PERCENT", 1.0)
GOVERNANCE_DEFAULT_CURRENCY = env_str("GOVERNANCE_DEFAULT_CURRENCY", "USD")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # One line per task is noise in the embedded default, where tasks run in-process.
        "celery.app.trace": {"level": env_str("CELERY_TRACE_LOG_LEVEL", "WARNING")},
    },
}

# --- Scale (issue 8): sample partitions, retention, metrics -------------------------------------
# Raw samples older than this many days are dropped a whole partition (month or day) at a time; 0 keeps them forever.
# Hourly rollups are never dropped, so reports and chargeback do not change when samples go.
SAMPLE_RETENTION_DAYS = env_int("SAMPLE_RETENTION_DAYS", 0)
# Raw samples are partitioned by UTC month, or by UTC day ("day": retention then drops whole days, and a fleet
# sampled every few seconds keeps each partition's indexes small enough to stay in memory).
SAMPLE_PARTITION = env_str("SAMPLE_PARTITION", "month")
if SAMPLE_PARTITION not in ("month", "day"):
    raise ImproperlyConfigured(f"SAMPLE_PARTITION: {SAMPLE_PARTITION!r} is neither 'month' nor 'day'")
# Sample partitions (months, or days) created ahead of time (PostgreSQL), besides the current one.
SAMPLE_PARTITIONS_AHEAD = env_int("SAMPLE_PARTITIONS_AHEAD", 3)
# /readyz (and gg_ready on /metrics): each probe of the database and the broker gives up after this long, and
# ingest counts as not ready while the inbox holds more unprocessed batches, or an older one, than these (0: off).
READY_TIMEOUT_S = env_float("READY_TIMEOUT_S", 2.0)
READY_INBOX_MAX_BATCHES = env_int("READY_INBOX_MAX_BATCHES", 10_000)
READY_INBOX_MAX_AGE_S = env_int("READY_INBOX_MAX_AGE_S", 900)
# /metrics answers only with `Authorization: Bearer <METRICS_TOKEN>`; unset, it answers 404.
METRICS_TOKEN = env_str("METRICS_TOKEN")

# --- Costs (chargeback) -------------------------------------------------------------------------
# Hours after its last report that a GPU still counts as capacity (collectors report every minute or so).
GOVERNANCE_GPU_GONE_AFTER_HOURS = env_int("GOVERNANCE_GPU_GONE_AFTER_HOURS", 24)
# A cluster-day's over-claim is announced to the admins (capacity.overclaimed) only when the GPU-hours claimed beyond
# the GPUs that exist pass this; smaller ones are still recorded and listed (admin, API, /metrics). 0: every one.
GOVERNANCE_OVERCLAIM_NOTIFY_GPU_HOURS = Decimal(str(env_float("GOVERNANCE_OVERCLAIM_NOTIFY_GPU_HOURS", 1.0)))
# Where budget alerts are POSTed (JSON) when a budget names no webhook of its own; empty: no webhook.
GOVERNANCE_BUDGET_WEBHOOK_URL = env_str("GOVERNANCE_BUDGET_WEBHOOK_URL")
GOVERNANCE_BILLING_ACCOUNT = env_str("GOVERNANCE_BILLING_ACCOUNT", "gpu-governance")
GOVERNANCE_PROVIDER_NAME = env_str("GOVERNANCE_PROVIDER_NAME", "On-premises GPU platform")
# Spend anomalies: a day more than THRESHOLD robust deviations (MADs x 1.4826) from the median of the WINDOW days
# before it, once MIN_DAYS of history exist; the MAD floor keeps a flat history from flagging every wiggle.
GOVERNANCE_ANOMALY_WINDOW_DAYS = env_int("GOVERNANCE_ANOMALY_WINDOW_DAYS", 28)
GOVERNANCE_ANOMALY_MIN_DAYS = env_int("GOVERNANCE_ANOMALY_MIN_DAYS", 7)
GOVERNANCE_ANOMALY_THRESHOLD = env_float("GOVERNANCE_ANOMALY_THRESHOLD", 5.0)
GOVERNANCE_ANOMALY_LOOKBACK_DAYS = env_int("GOVERNANCE_ANOMALY_LOOKBACK_DAYS", 3)
