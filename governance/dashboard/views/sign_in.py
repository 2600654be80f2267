"""Signing in, with a password or through the OpenID provider: both land people on the same page."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from django.urls import reverse
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView

from governance.dashboard.views.costs import last_complete_month
from governance.org.auth import signed_in_user
from governance.org.models import User
from governance.org.selectors import teams_led

# Where the provider's answer did not sign anyone in (refused by governance.org.oidc, or denied at the provider).
SSO_REFUSED = "refused"


def is_engineer(user: User) -> bool:
    return not user.sees_all_costs and not teams_led(user=user).exists()


def landing_url(user: User, url: str) -> str:
    """Where they were going; otherwise engineers land on their own month, finance on the statement of the last
    complete month, everyone else on the overview."""
    if url not in ("", "/", resolve_url(settings.LOGIN_REDIRECT_URL)):
        return url
    if user.role == User.Role.FINANCE:
        return f"{reverse('costs:month')}?month={last_complete_month()}"
    return reverse("dashboard:me") if is_engineer(user) else url


class LoginView(auth_views.LoginView):
    """The sign-in page: a local account's password, and the single sign-on button when OIDC is on."""

    def get_success_url(self) -> str:
        return landing_url(signed_in_user(self.request), super().get_success_url())

    def get_context_data(self, **kwargs: object) -> dict[str, object]:
        context = super().get_context_data(**kwargs)
        context["sso_refused"] = self.request.GET.get("sso") == SSO_REFUSED
        return context


class LogoutView(auth_views.LogoutView):
    """Signs out here and, for a single sign-on session where the provider has an end-session endpoint
    (OIDC_OP_LOGOUT_ENDPOINT), at the provider too, which sends the browser back to the sign-in page."""

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        endpoint = getattr(settings, "OIDC_OP_LOGOUT_ENDPOINT", "")
        if not (settings.OIDC_ENABLED and endpoint and id_token):
            return response
        back = request.build_absolute_uri(resolve_url(settings.LOGOUT_REDIRECT_URL))
        query = urlencode({"id_token_hint": id_token, "client_id": settings.OIDC_RP_CLIENT_ID,
                           "post_logout_redirect_uri": back})  # fmt: skip
        return HttpResponseRedirect(f"{endpoint}?{query}")


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """mozilla-django-oidc's callback (OIDC_CALLBACK_CLASS): lands like the password sign-in, and a refusal comes
    back to the sign-in page saying so, rather than to a page that silently asks for a password."""

    @property
    def success_url(self) -> str:
        return landing_url(self.user, super().success_url)

    @property
    def failure_url(self) -> str:
        return f"{reverse('login')}?sso={SSO_REFUSED}"
