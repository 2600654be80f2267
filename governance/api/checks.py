"""Deployment checks (`manage.py check --deploy`) for the API's own settings."""

from django.conf import settings
from django.core.checks import Tags, Warning, register

LOCAL_CACHE = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.dummy.DummyCache",
    "django.core.cache.backends.filebased.FileBasedCache",
)


@register(Tags.security, deploy=True)
def throttles_share_one_cache(app_configs, **kwargs) -> list[Warning]:
    if settings.CACHES["default"]["BACKEND"] not in LOCAL_CACHE:
        return []
    return [
        Warning(
            "Rate limits and invalid-token counters live in per-process memory: each web worker counts alone.",
            hint="Set CACHE_URL to a Redis database (redis://host:6379/1).",
            id="governance.W001",
        )
    ]
