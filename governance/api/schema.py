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


# Integer bounds Django takes from the database backend (SQLite reports 64-bit for every field).
_BACKEND_MAXIMUMS = {2**15 - 1, 2**31 - 1, 2**63 - 1}
_BACKEND_MINIMUMS = {-(2**15), -(2**31), -(2**63)}


def drop_backend_integer_ranges(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Keep the schema the same on SQLite and PostgreSQL, so the committed file is one file."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "integer":
                if node.get("maximum") in _BACKEND_MAXIMUMS:
                    del node["maximum"]
                    if node.get("format") == "int64":
                        del node["format"]
                if node.get("minimum") in _BACKEND_MINIMUMS:
                    del node["minimum"]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(result)
    return result
