from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from governance.dashboard.views.sign_in import LoginView, LogoutView
from governance.usage.metrics import metrics_view


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """Browsers ask for /favicon.ico whatever the page says; the icon is a static file."""
    return HttpResponseRedirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path(
        "accounts/login/",
        LoginView.as_view(extra_context={"oidc_enabled": settings.OIDC_ENABLED}),
        name="login",
    ),
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path("accounts/password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("api/v1/", include("governance.api.urls", namespace="v1")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file, so the page needs no inline script (CSP).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("metrics", metrics_view, name="metrics"),
    path("costs/", include("governance.dashboard.urls_costs")),
    path("", include("governance.dashboard.urls")),
    path("", include("governance.dashboard.urls_findings")),
]

if settings.OIDC_ENABLED:
    urlpatterns[:0] = [
        path("oidc/", include("mozilla_django_oidc.urls")),
        # The admin's own login form has no single sign-on button: people who sign in only through the provider
        # (platform admins by their groups) would be stuck at a password they do not have.
        path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    ]
