"""OpenAPI post-processing: every operation documents the one error shape for the errors it can give."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"nullable": True, "description": "Field errors, or per-record errors for ingest."},
            },
        }
    },
}
ERRORS = {
    "400": "The request is not valid; details name each field and the reason.",
    "401": "No credentials, or an invalid or revoked token.",
    "403": "The credentials are valid but their role or token scope does not allow this.",
    "404": "No such object, or not one you may see.",
    "429": "Too many requests for this token; retry after the Retry-After header.",
}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status, description in ERRORS.items():
                responses.setdefault(status, {"description": description, "content": ref})
    return result


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "governance.api.auth.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token (`ggt_...`); its scope (ingest, read, write, admin) limits what it may do.",
        }
