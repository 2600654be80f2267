"""One error shape for the whole API: {"error": {"code", "message", "details"}}.

A database that cannot be reached (or a connection that broke) is 503 with Retry-After, never a 500: a
collector keeps its batch and sends it again, nothing was stored.
"""

import logging
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db.models import ProtectedError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger(__name__)

PROTECTED = "Other rows still refer to this object; remove or move them first."
DATABASE_UNAVAILABLE = "The database is unavailable; nothing was stored. Retry after {seconds} seconds."


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, OperationalError | InterfaceError):
        logger.warning("API request answered 503: the database is unavailable: %s", exc)
        seconds = settings.API_DATABASE_RETRY_AFTER_S
        unavailable = error_response(
            status.HTTP_503_SERVICE_UNAVAILABLE, "database_unavailable", DATABASE_UNAVAILABLE.format(seconds=seconds)
        )
        unavailable["Retry-After"] = str(seconds)
        return unavailable
    if isinstance(exc, ProtectedError):
        protected = sorted({str(obj._meta.verbose_name_plural) for obj in exc.protected_objects})
        return error_response(status.HTTP_409_CONFLICT, "protected", PROTECTED, protected)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    code = getattr(exc, "default_code", "error")
    if isinstance(data, dict) and "error" in data:
        return response
    if isinstance(data, dict) and set(data) == {"detail"}:
        message, details = str(data["detail"]), None
        code = getattr(data["detail"], "code", code)
    else:
        message, details = "The request is not valid.", data
    response.data = {"error": {"code": code, "message": message, "details": details}}
    return response


def error_response(status: int, code: str, message: str, details: object = None) -> Response:
    return Response({"error": {"code": code, "message": message, "details": details}}, status=status)
