"""The signed-in user of a request, typed.

Django types `request.user` as `User | AnonymousUser`. Behind `login_required` (pages) or an API permission
that refuses anonymous callers it is always a `User`: `signed_in_user` says so once, for the type checker,
and refuses the request if a view ever lost its guard.
"""

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.request import Request

from governance.org.models import User

NOT_SIGNED_IN = "Sign in first."


def signed_in_user(request: HttpRequest | Request) -> User:
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied(NOT_SIGNED_IN)
    return user
