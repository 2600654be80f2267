"""One error shape for the whole API: {"error": {"code", "message", "details"}}."""

from typing import Any

from django.db.models import ProtectedError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

PROTECTED = "Other rows still refer to this object; remove or move them first."


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
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
