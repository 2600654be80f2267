"""OpenID Connect single sign-on beside local accounts (mozilla-django-oidc): on when OIDC_RP_CLIENT_ID is set.

The endpoints are the ones the provider's discovery document (`<issuer>/.well-known/openid-configuration`) names.
settings.py adds the backend and the app when it is on; governance/urls.py mounts /oidc/.
"""

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from governance.lib.env import env_bool, env_list, env_str

OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_ADMIN_GROUPS = env_list("OIDC_ADMIN_GROUPS", [])
OIDC_FINANCE_GROUPS = env_list("OIDC_FINANCE_GROUPS", [])
# A group "gg-team:<team slug>:lead" or "...:engineer" makes its member that team's lead or engineer.
OIDC_TEAM_GROUP_PREFIX = env_str("OIDC_TEAM_GROUP_PREFIX", "gg-team:")
# Off: a superuser, or a platform admin by local role, cannot sign in through the provider (only with a password).
OIDC_ALLOW_SUPERUSER = env_bool("OIDC_ALLOW_SUPERUSER", False)
# Set: an ID token from another issuer is refused.
OIDC_OP_ISSUER = env_str("OIDC_OP_ISSUER")


def _required(name: str) -> str:
    value = env_str(name)
    if not value:
        raise ImproperlyConfigured(f"{name} must be set when OIDC_RP_CLIENT_ID is")
    return value


def _origin(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ImproperlyConfigured(f"OIDC_OP_LOGOUT_ENDPOINT is not an http(s) URL: {url!r}")
    return f"{parts.scheme}://{parts.netloc}"


if OIDC_ENABLED:
    OIDC_RP_CLIENT_SECRET = _required("OIDC_RP_CLIENT_SECRET")
    OIDC_OP_AUTHORIZATION_ENDPOINT = _required("OIDC_OP_AUTHORIZATION_ENDPOINT")
    OIDC_OP_TOKEN_ENDPOINT = _required("OIDC_OP_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = _required("OIDC_OP_USER_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT") or None
    OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
    OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile groups")
    # Set (the discovery document's end_session_endpoint): signing out here signs out at the provider too, or its
    # session would sign the same person straight back in at the next click on the single sign-on button.
    OIDC_OP_LOGOUT_ENDPOINT = env_str("OIDC_OP_LOGOUT_ENDPOINT")
    # The ID token is the logout request's hint of whose session to end.
    OIDC_STORE_ID_TOKEN = bool(OIDC_OP_LOGOUT_ENDPOINT)
    # The sign-out form's answer redirects there, which the pages' Content-Security-Policy (form-action) must allow.
    OIDC_FORM_ACTION = [_origin(OIDC_OP_LOGOUT_ENDPOINT)] if OIDC_OP_LOGOUT_ENDPOINT else []

# Read by mozilla_django_oidc.urls when /oidc/ is mounted: the callback lands people like the password sign-in.
OIDC_CALLBACK_CLASS = "governance.dashboard.views.sign_in.SsoCallbackView"
