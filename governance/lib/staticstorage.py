"""Static files under content-hashed names, gzip and brotli copies beside them (WhiteNoise)."""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class HashedStaticFilesStorage(CompressedManifestStaticFilesStorage):
    """Links the hashed name with DEBUG on too (Django links the plain name then), so `make run` serves what
    production serves: each file cached for a year under its hash, fetched once across pages."""

    def url(self, name: str | None, force: bool = False) -> str:
        return super().url(name, force=True)
