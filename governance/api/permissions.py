"""Permission classes, one per rule, to combine on a viewset: `[HasReadScope, AdminWrites]`.

| class            | reads (GET, HEAD, OPTIONS)          | writes                                   |
|------------------|-------------------------------------|------------------------------------------|
| HasReadScope     | session, or read/write/admin token  | session, or write/admin token            |
| AdminWrites      | anyone HasReadScope lets in         | platform admins (reference data)         |
| FinanceWrites    | anyone HasReadScope lets in         | finance and platform admins (close, ...) |
| VisibleRowWrites | anyone HasReadScope lets in         | anyone, on rows the selectors show them  |
| AdminOnly        | platform admins                     | platform admins                          |

Which rows a user reads is never a permission class: the viewset's queryset comes from the
org selectors, so a row another team owns is a 404, never a 403 that confirms it exists.
An ingest token passes none of these (HasReadScope refuses it): it can only ingest.
"""

from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.views import APIView

from governance.api.auth import HasIngestScope, HasReadScope, token_allows
from governance.api.models import ApiToken
from governance.org.models import User

__all__ = [
    "AdminOnly",
    "AdminWrites",
    "FinanceWrites",
    "HasIngestScope",
    "HasReadScope",
    "SessionOrAdminToken",
    "VisibleRowWrites",
]


def _reading(request: Request) -> bool:
    return request.method in permissions.SAFE_METHODS


class AdminWrites(permissions.BasePermission):
    message = "Only platform admins may change this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return _reading(request) or (isinstance(request.user, User) and request.user.is_platform_admin)


class FinanceWrites(permissions.BasePermission):
    message = "Only finance and platform admins may change this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return _reading(request) or (isinstance(request.user, User) and request.user.sees_all_costs)


class VisibleRowWrites(permissions.BasePermission):
    """Writes are allowed; the visible queryset decides on which rows (others are 404)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return True


class AdminOnly(permissions.BasePermission):
    message = "Only platform admins may see this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.is_platform_admin)


class SessionOrAdminToken(permissions.BasePermission):
    """For minting credentials: a signed-in person, or a token that already holds the admin scope."""

    message = "Creating a token needs a signed-in session or an admin-scoped token."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return _reading(request) or request.auth is None or token_allows(request.auth, ApiToken.Scope.ADMIN)
