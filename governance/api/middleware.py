"""Every web request is a door of the audit log: the admin, the API or a page, with its path and client address."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from governance.lib.doors import Door, door_entered


def client_address(request: HttpRequest) -> str:
    """REMOTE_ADDR; behind a trusted TLS proxy (TLS_PROXY_TRUSTED) the address that proxy appended last."""
    if settings.TLS_PROXY_TRUSTED:
        forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
        if forwarded:
            return forwarded[-1]
    return str(request.META.get("REMOTE_ADDR", ""))


def door_kind(path: str) -> str:
    if path.startswith("/admin/"):
        return "admin"
    return "api" if path.startswith("/api/") else "page"


class AuditDoorMiddleware:
    """Sets the door for the request; the user (and the API's token, once DRF authenticated it) are read from the
    request when a change is recorded."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        door = Door(kind=door_kind(request.path), where=request.path[:300], address=client_address(request),
                    request=request)  # fmt: skip
        with door_entered(door):
            return self.get_response(request)
