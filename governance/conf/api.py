"""The REST API: authentication, parsing, versioning, paging, throttles, tokens and the OpenAPI schema."""

from django.core.exceptions import ImproperlyConfigured

from governance.lib.env import env_bool, env_int, env_str

# Set when a TLS-terminating proxy in front appends to X-Forwarded-For (settings.TLS_PROXY_TRUSTED, read alike).
_tls_proxy_trusted = env_bool("TLS_PROXY_TRUSTED", False)

# --- REST API -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "governance.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "governance.api.renderers.BrowsableAPIRenderer",
    ],
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
        "governance.api.filters.KnownQueryParameters",
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
    "NUM_PROXIES": 1 if _tls_proxy_trusted else 0,
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
# An ingest token found valid authenticates the next requests to the same web process without a query for this
# many seconds (0: looked up every time); so a revoked one keeps working in other processes that long at most.
API_TOKEN_CACHE_S = env_int("API_TOKEN_CACHE_S", 5)
# Invalid bearer tokens one client address may present in a minute before it gets 429.
API_TOKEN_FAILURES_PER_MINUTE = env_int("API_TOKEN_FAILURES_PER_MINUTE", 20)
# While the database is unreachable the API answers 503 with this Retry-After (seconds).
API_DATABASE_RETRY_AFTER_S = env_int("API_DATABASE_RETRY_AFTER_S", 10)
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
    # Two `mode` fields: billing (billed, showback) keeps its name; remediation's is named for it.
    "ENUM_NAME_OVERRIDES": {
        "ModeEnum": "governance.costs.models.terms.BillingModeTerm.Mode",
        "RemediationModeEnum": "governance.remediation.models.RemediationPolicy.Mode",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "governance.api.schema.add_error_responses",
        "governance.api.schema.drop_backend_integer_ranges",
    ],
}
