"""Settings, read from environment variables only.

With no variable set you get the embedded default: SQLite under var/, Celery tasks run in-process,
DEBUG on and a secret generated once into var/. DATABASE_URL and CELERY_BROKER_URL switch to
PostgreSQL and a real broker.
"""

import secrets
from datetime import timedelta
from pathlib import Path

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

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
    "governance.notify",
    "governance.schedule",
    "governance.api",
    "governance.dashboard",
]

MIDDLEWARE = [
    "governance.usage.health.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
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
DATABASES = {
    "default": database_from_url(DATABASE_URL)
    if DATABASE_URL
    else {"ENGINE": "django.db.backends.sqlite3", "NAME": VAR_DIR / "governance.sqlite3", "OPTIONS": {"timeout": 30}}
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Without it, connecting to a database host that is gone waits for the kernel's TCP timeout (minutes).
    DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT_S", 3))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Throttle counters (API rates, invalid bearer tokens) live here. LocMem is per process: production sets
# CACHE_URL (or REDIS_URL) to a Redis database of its own so that every web worker counts together.
CACHE_URL = env_str("CACHE_URL") or env_str("REDIS_URL")
if CACHE_URL and not CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(f"CACHE_URL {CACHE_URL!r} is not a Redis URL (redis://host:6379/1)")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    if CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "gpu-governance"}
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

# OpenID Connect single sign-on beside local accounts: on when OIDC_RP_CLIENT_ID is set.
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_ADMIN_GROUPS = env_list("OIDC_ADMIN_GROUPS", [])
OIDC_FINANCE_GROUPS = env_list("OIDC_FINANCE_GROUPS", [])
# A group "gg-team:<team slug>:lead" or "...:engineer" makes its member that team's lead or engineer.
OIDC_TEAM_GROUP_PREFIX = env_str("OIDC_TEAM_GROUP_PREFIX", "gg-team:")
if OIDC_ENABLED:

    def _required(name: str) -> str:
        value = env_str(name)
        if not value:
            raise ImproperlyConfigured(f"{name} must be set when OIDC_RP_CLIENT_ID is")
        return value

    OIDC_RP_CLIENT_SECRET = _required("OIDC_RP_CLIENT_SECRET")
    OIDC_OP_AUTHORIZATION_ENDPOINT = _required("OIDC_OP_AUTHORIZATION_ENDPOINT")
    OIDC_OP_TOKEN_ENDPOINT = _required("OIDC_OP_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = _required("OIDC_OP_USER_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT") or None
    OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
    OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile groups")
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
    "governance.dashboard.finders.PlotlyFinder",
]
# Static files come from the finders too, so plotly.js is served without a collectstatic step.
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

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-governance@localhost")

# --- Celery -------------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
# Without a broker, tasks run in-process right after the transaction that enqueued them commits.
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
# Periodic analysis tasks are acknowledged when they start: beat runs them again if a worker dies, and their
# length is then bounded by no visibility timeout. The tasks that must not be lost are set apart below.
CELERY_TASK_ACKS_LATE = False
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = env_int("CELERY_WORKER_PREFETCH_MULTIPLIER", 1)
CELERY_TASK_DEFAULT_QUEUE = "analysis"
CELERY_TASK_ROUTES = {"usage.*": {"queue": "ingest"}}
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# Celery's Django fixup closes every database connection before and after every task unless this is set,
# so each ingest batch paid for a new PostgreSQL backend (fork, authentication, cold catalog caches: more
# CPU than writing the batch's samples). Set, it closes them only every this many tasks; between tasks
# governance/celery.py applies Django's own rule instead (CONN_MAX_AGE, health checks, after errors).
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000)

# --- Delivery and recovery (issue 21) -----------------------------------------------------------
# Ingest and pricing tasks (TASK_DELIVERY_PATTERNS) are acknowledged only once they are done and given back to
# the queue at once when their worker process dies (acks_late, reject_on_worker_lost), run under a time limit,
# and retry a transient database error with exponential backoff and full jitter for long enough to outlast a
# database restart (TASK_MAX_RETRIES tries, waits capped at TASK_RETRY_BACKOFF_MAX_S). Housekeeping in those
# namespaces is re-run by beat instead and keeps no time limit. See governance/celery.py.
TASK_DELIVERY_PATTERNS = env_list("TASK_DELIVERY_PATTERNS", ["usage.*", "costs.*"])
TASK_DELIVERY_EXEMPT = ["usage.maintain_partitions", "usage.remap_jobs", "usage.purge_inbox"]
TASK_TIME_LIMIT_S = env_int("TASK_TIME_LIMIT_S", 120)
TASK_MAX_RETRIES = env_int("TASK_MAX_RETRIES", 12)
TASK_RETRY_BACKOFF_MAX_S = env_int("TASK_RETRY_BACKOFF_MAX_S", 120)
# Redis hands an unacknowledged message to another worker once it is this old. It must exceed the time a message
# legitimately stays unacknowledged: a task's time limit, plus the countdown of a retry, which a Redis worker holds
# unacknowledged until it is due. A dead worker's batches do not wait for it: a worker that connects to the broker
# has the inbox swept at once, and beat sweeps it every INBOX_SWEEP_SECONDS.
BROKER_VISIBILITY_TIMEOUT_S = env_int("BROKER_VISIBILITY_TIMEOUT_S", TASK_TIME_LIMIT_S + TASK_RETRY_BACKOFF_MAX_S + 60)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": BROKER_VISIBILITY_TIMEOUT_S,
    # Look for messages past the visibility timeout every 10 s (kombu's default scans every 100 s).
    "unacked_restore_throttle": 1,
    # A broker that is down or unreachable costs an ingest request seconds at most, never minutes.
    "socket_connect_timeout": env_float("BROKER_CONNECT_TIMEOUT_S", 2.0),
    "socket_timeout": env_float("BROKER_SOCKET_TIMEOUT_S", 10.0),
}
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("BROKER_CONNECT_TIMEOUT_S", 2.0)
CELERY_TASK_ANNOTATIONS = ["governance.celery.DeliveryPolicy"]
# After an enqueue fails (broker down), the web process stores batches without trying the broker for this long;
# the sweep enqueues them.
INGEST_ENQUEUE_PAUSE_S = env_float("INGEST_ENQUEUE_PAUSE_S", 5.0)
# How long a worker waits for the row lock of a batch another session holds (a session about to die, most often)
# before it retries the batch later.
INGEST_CLAIM_LOCK_TIMEOUT_S = env_float("INGEST_CLAIM_LOCK_TIMEOUT_S", 5.0)
# The PostgreSQL session of each worker process: a worker killed or cut off in the middle of a transaction gives
# its row locks back within seconds (a backend running a statement notices its client is gone; keepalives find a
# vanished host), and a worker stuck inside a transaction loses it.
WORKER_DATABASE_SESSION = {
    "client_connection_check_interval": "1s",
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
    "idle_in_transaction_session_timeout": f"{env_int('WORKER_IDLE_IN_TRANSACTION_TIMEOUT_S', 300)}s",
}

# --- REST API -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "governance.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "governance.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_VERSIONING_CLASS": "rest_framework.versioning.NamespaceVersioning",
    "DEFAULT_VERSION": "v1",
    "ALLOWED_VERSIONS": ["v1"],
    "EXCEPTION_HANDLER": "governance.api.errors.exception_handler",
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "governance.api.pagination.OrderedPageNumberPagination",
    "DEFAULT_THROTTLE_CLASSES": [
        "governance.api.throttling.TokenRateThrottle",
        "governance.api.throttling.TokenScopedRateThrottle",
    ],
    # Per token (else per user): "user" for every request, "ingest" for the ingest endpoint instead.
    # Throttles key anonymous clients by address: the peer's, or the one a trusted proxy appended.
    "NUM_PROXIES": 1 if TLS_PROXY_TRUSTED else 0,
    "DEFAULT_THROTTLE_RATES": {
        "user": env_str("API_THROTTLE_RATE", "1200/min"),
        "ingest": env_str("API_THROTTLE_RATE_INGEST", "600/min"),
    },
}
API_PAGE_SIZE = env_int("API_PAGE_SIZE", 50)
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", 500)
# A new API token lives this many days unless its creator asks for less; nobody may ask for more than the maximum.
API_TOKEN_DEFAULT_DAYS = env_int("API_TOKEN_DEFAULT_DAYS", 90)
API_TOKEN_MAX_DAYS = env_int("API_TOKEN_MAX_DAYS", 365)
# Invalid bearer tokens one client address may present in a minute before it gets 429.
API_TOKEN_FAILURES_PER_MINUTE = env_int("API_TOKEN_FAILURES_PER_MINUTE", 20)
if not 1 <= API_TOKEN_DEFAULT_DAYS <= API_TOKEN_MAX_DAYS:
    raise ImproperlyConfigured("API_TOKEN_DEFAULT_DAYS must be between 1 and API_TOKEN_MAX_DAYS")
SPECTACULAR_SETTINGS = {
    "TITLE": "gpu-governance API",
    "DESCRIPTION": "GPU usage ingest, chargeback, efficiency findings.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the drf-spectacular-sidecar package: the docs page works with no internet.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "governance.api.schema.add_error_responses",
        "governance.api.schema.drop_backend_integer_ranges",
    ],
}

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

# Periodic work (celery beat). Each entry is idempotent: running it twice does no harm.
# The inbox sweep is the last resort of delivery: it re-enqueues batches left unprocessed for INBOX_SWEEP_AFTER_S.
INBOX_SWEEP_SECONDS = env_float("INBOX_SWEEP_SECONDS", 15.0)
INBOX_SWEEP_AFTER_S = env_float("INBOX_SWEEP_AFTER_S", 30.0)
# Processed inbox batches are deleted this many days after processing; 0 keeps them. A batch id is recognised as
# a duplicate only while its inbox row exists: keep this longer than any agent's spool can hold batches back.
INBOX_RETENTION_DAYS = env_int("INBOX_RETENTION_DAYS", 7)
CELERY_BEAT_SCHEDULE = {
    "sweep-ingest-inbox": {"task": "usage.sweep_inbox", "schedule": INBOX_SWEEP_SECONDS},
    "purge-ingest-inbox": {"task": "usage.purge_inbox", "schedule": 24 * 3600.0},
}

# --- Efficiency findings (governance/efficiency) -------------------------------------------------
# Rule thresholds (design defaults); the admin lists the values in force at /admin/efficiency/finding/thresholds/.
GOVERNANCE_RULE_MIN_RUNTIME_MINUTES = env_float("GOVERNANCE_RULE_MIN_RUNTIME_MINUTES", 5)
GOVERNANCE_RULE_IDLE_MIN_MINUTES = env_float("GOVERNANCE_RULE_IDLE_MIN_MINUTES", 30)
GOVERNANCE_RULE_OVERALLOCATED_BUSY_SM_PERCENT = env_float("GOVERNANCE_RULE_OVERALLOCATED_BUSY_SM_PERCENT", 10)
GOVERNANCE_RULE_LOW_UTIL_RED_PERCENT = env_float("GOVERNANCE_RULE_LOW_UTIL_RED_PERCENT", 15)
GOVERNANCE_RULE_LOW_UTIL_NOTE_PERCENT = env_float("GOVERNANCE_RULE_LOW_UTIL_NOTE_PERCENT", 25)
GOVERNANCE_RULE_MIG_FIT_SM_PERCENT = env_float("GOVERNANCE_RULE_MIG_FIT_SM_PERCENT", 15)
GOVERNANCE_RULE_MIG_FIT_MEMORY_MARGIN = env_float("GOVERNANCE_RULE_MIG_FIT_MEMORY_MARGIN", 1.2)
GOVERNANCE_RULE_BATCH_HEADROOM_SM_PERCENT = env_float("GOVERNANCE_RULE_BATCH_HEADROOM_SM_PERCENT", 60)
GOVERNANCE_RULE_BATCH_HEADROOM_MEMORY_PERCENT = env_float("GOVERNANCE_RULE_BATCH_HEADROOM_MEMORY_PERCENT", 50)
GOVERNANCE_RULE_BATCH_HEADROOM_TARGET_MEMORY_PERCENT = env_float(
    "GOVERNANCE_RULE_BATCH_HEADROOM_TARGET_MEMORY_PERCENT", 85
)
GOVERNANCE_RULE_MEMORY_BOUND_MEMORY_PERCENT = env_float("GOVERNANCE_RULE_MEMORY_BOUND_MEMORY_PERCENT", 90)
GOVERNANCE_RULE_MEMORY_BOUND_SM_PERCENT = env_float("GOVERNANCE_RULE_MEMORY_BOUND_SM_PERCENT", 40)
GOVERNANCE_RULE_DATA_STARVED_SM_PERCENT = env_float("GOVERNANCE_RULE_DATA_STARVED_SM_PERCENT", 40)
GOVERNANCE_RULE_DATA_STARVED_IO_WAIT_PERCENT = env_float("GOVERNANCE_RULE_DATA_STARVED_IO_WAIT_PERCENT", 20)
GOVERNANCE_RULE_DATA_STARVED_HOST_CPU_PERCENT = env_float("GOVERNANCE_RULE_DATA_STARVED_HOST_CPU_PERCENT", 90)
GOVERNANCE_RULE_DATA_STARVED_OSCILLATION_CV = env_float("GOVERNANCE_RULE_DATA_STARVED_OSCILLATION_CV", 0.5)
GOVERNANCE_RULE_NUMA_MISMATCH_FRACTION = env_float("GOVERNANCE_RULE_NUMA_MISMATCH_FRACTION", 0.5)
GOVERNANCE_RULE_INFERENCE_MIN_HOURS = env_float("GOVERNANCE_RULE_INFERENCE_MIN_HOURS", 6)
GOVERNANCE_RULE_INFERENCE_SM_PERCENT = env_float("GOVERNANCE_RULE_INFERENCE_SM_PERCENT", 15)
GOVERNANCE_RULE_INFERENCE_MEMORY_PERCENT = env_float("GOVERNANCE_RULE_INFERENCE_MEMORY_PERCENT", 50)
# An ended job is evaluated a last time once this long has passed since its end (late samples are in).
GOVERNANCE_FINDINGS_FINAL_DELAY_MINUTES = env_int("GOVERNANCE_FINDINGS_FINAL_DELAY_MINUTES", 15)
# POSTed a JSON body for each new finding; empty: no webhook.
GOVERNANCE_FINDINGS_WEBHOOK_URL = env_str("GOVERNANCE_FINDINGS_WEBHOOK_URL")
GOVERNANCE_FINDINGS_WEBHOOK_TIMEOUT_S = env_float("GOVERNANCE_FINDINGS_WEBHOOK_TIMEOUT_S", 5)
# Alert when a cluster's effective utilisation over the last day is under this; the chart's reference line.
GOVERNANCE_CLUSTER_ALERT_UTIL_PERCENT = env_float("GOVERNANCE_CLUSTER_ALERT_UTIL_PERCENT", 30)
GOVERNANCE_CLUSTER_TARGET_UTIL_PERCENT = env_float("GOVERNANCE_CLUSTER_TARGET_UTIL_PERCENT", 40)
GOVERNANCE_CLUSTER_ALERT_EMAILS = env_list("GOVERNANCE_CLUSTER_ALERT_EMAILS", [])
GOVERNANCE_CLUSTER_ALERT_WEBHOOK_URL = env_str("GOVERNANCE_CLUSTER_ALERT_WEBHOOK_URL")
CELERY_BEAT_SCHEDULE |= {
    "evaluate-running-jobs": {"task": "efficiency.evaluate_running", "schedule": 15 * 60.0},
    "evaluate-ended-jobs": {"task": "efficiency.evaluate_ended", "schedule": 5 * 60.0},
    "check-cluster-utilisation": {"task": "efficiency.cluster_alerts", "schedule": 60 * 60.0},
    "weekly-findings-digest": {
        "task": "efficiency.weekly_digest",
        "schedule": crontab(minute=0, hour=7, day_of_week="mon"),
    },
}

# --- Notifications (governance/notify): an outbox row per event and destination, delivered with retries -------
# Every event (finding.opened/acknowledged/resolved/reopened/dismissed, budget.threshold, cluster.low_utilisation)
# also goes to these: https:// URLs get signed JSON; slack://, msteams://, mailto://... are apprise URLs.
GOVERNANCE_NOTIFY_DESTINATIONS = env_list("GOVERNANCE_NOTIFY_DESTINATIONS", [])
# Signs JSON deliveries (X-GG-Signature: sha256=HMAC(secret, "<X-GG-Timestamp>.<body>")); empty: unsigned.
GOVERNANCE_NOTIFY_SECRET = env_str("GOVERNANCE_NOTIFY_SECRET")
GOVERNANCE_NOTIFY_TIMEOUT_S = env_float("GOVERNANCE_NOTIFY_TIMEOUT_S", 5)
# Retry n waits base x 2^(n-1) seconds, at most the maximum; after the last attempt the row is given up.
GOVERNANCE_NOTIFY_RETRY_BASE_S = env_float("GOVERNANCE_NOTIFY_RETRY_BASE_S", 30)
GOVERNANCE_NOTIFY_RETRY_MAX_S = env_float("GOVERNANCE_NOTIFY_RETRY_MAX_S", 3600)
GOVERNANCE_NOTIFY_MAX_ATTEMPTS = env_int("GOVERNANCE_NOTIFY_MAX_ATTEMPTS", 12)
CELERY_BEAT_SCHEDULE["deliver-notifications"] = {"task": "notify.deliver_due", "schedule": 60.0}

# --- Periodic work (governance/schedule): CELERY_BEAT_SCHEDULE is the one schedule. Production runs celery beat;
# the embedded default (no broker) runs the same entries in a thread of `manage.py runserver`.
GOVERNANCE_INPROCESS_SCHEDULER = env_bool("GOVERNANCE_INPROCESS_SCHEDULER", not CELERY_BROKER_URL)
GOVERNANCE_INPROCESS_SCHEDULER_TICK_S = env_float("GOVERNANCE_INPROCESS_SCHEDULER_TICK_S", 5)

# --- Scale (issue 8): sample partitions, retention, metrics -------------------------------------
# Raw samples older than this many days are dropped a whole month at a time; 0 keeps them forever.
# Hourly rollups are never dropped, so reports and chargeback do not change when samples go.
SAMPLE_RETENTION_DAYS = env_int("SAMPLE_RETENTION_DAYS", 0)
# Monthly sample partitions created ahead of time (PostgreSQL), besides the current month.
SAMPLE_PARTITIONS_AHEAD = env_int("SAMPLE_PARTITIONS_AHEAD", 3)
CELERY_BEAT_SCHEDULE["maintain-sample-partitions"] = {"task": "usage.maintain_partitions", "schedule": 6 * 3600.0}
# Housekeeping is not ingest: keep it off the ingest workers.
CELERY_TASK_ROUTES["usage.maintain_partitions"] = {"queue": "analysis"}
CELERY_TASK_ROUTES["usage.remap_jobs"] = {"queue": "analysis"}
CELERY_TASK_ROUTES["usage.purge_inbox"] = {"queue": "analysis"}
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
# Where budget alerts are POSTed (JSON) when a budget names no webhook of its own; empty: no webhook.
GOVERNANCE_BUDGET_WEBHOOK_URL = env_str("GOVERNANCE_BUDGET_WEBHOOK_URL")
GOVERNANCE_BILLING_ACCOUNT = env_str("GOVERNANCE_BILLING_ACCOUNT", "gpu-governance")
GOVERNANCE_PROVIDER_NAME = env_str("GOVERNANCE_PROVIDER_NAME", "On-premises GPU platform")
CELERY_BEAT_SCHEDULE["check-budgets"] = {"task": "costs.check_budgets", "schedule": 900.0}
# The charge ledger: marked days are re-priced after each batch and every minute; running jobs every 5 minutes.
CELERY_BEAT_SCHEDULE["reprice-marked-days"] = {"task": "costs.reprice", "schedule": 60.0}
CELERY_BEAT_SCHEDULE["reprice-running-jobs"] = {"task": "costs.reprice_running", "schedule": 300.0}
# Spend anomalies: a day more than THRESHOLD robust deviations (MADs x 1.4826) from the median of the WINDOW days
# before it, once MIN_DAYS of history exist; the MAD floor keeps a flat history from flagging every wiggle.
GOVERNANCE_ANOMALY_WINDOW_DAYS = env_int("GOVERNANCE_ANOMALY_WINDOW_DAYS", 28)
GOVERNANCE_ANOMALY_MIN_DAYS = env_int("GOVERNANCE_ANOMALY_MIN_DAYS", 7)
GOVERNANCE_ANOMALY_THRESHOLD = env_float("GOVERNANCE_ANOMALY_THRESHOLD", 5.0)
GOVERNANCE_ANOMALY_LOOKBACK_DAYS = env_int("GOVERNANCE_ANOMALY_LOOKBACK_DAYS", 3)
CELERY_BEAT_SCHEDULE["detect-anomalies"] = {"task": "costs.detect_anomalies", "schedule": 3600.0}
