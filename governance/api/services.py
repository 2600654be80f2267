from governance.api.models import ApiToken, hash_token
from governance.org.models import User


def api_token_create(*, user: User, name: str, scope: str) -> tuple[ApiToken, str]:
    """Create a token; the raw value is returned once and never stored."""
    if scope not in ApiToken.Scope.values:
        raise ValueError(f"scope {scope!r} is not one of {', '.join(ApiToken.Scope.values)}")
    raw = ApiToken.generate()
    token = ApiToken.objects.create(user=user, name=name, scope=scope, prefix=raw[:10], key_hash=hash_token(raw))
    return token, raw
