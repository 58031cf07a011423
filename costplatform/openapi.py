"""The error answers every API operation can give, added to the OpenAPI schema.

drf-spectacular documents only the 200 of each view; the platform also answers 400 (invalid
parameters or body), 401 (no or bad credentials), 403 (a role or scope that may not), 404 and,
where a body is read, 415. Each carries a JSON body: `{"detail": "..."}`, or DRF's field errors
`{"field": ["message", ...]}`. tests/hostile fuzzes every operation against these.
"""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA: dict[str, Any] = {
    "description": '`{"detail": "what is wrong"}`, or per field `{"field": ["message", ...]}`.',
    "oneOf": [
        {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]},
        {"type": "object", "additionalProperties": {"oneOf": [{"type": "array"}, {"type": "object"}]}},
        {"type": "array", "items": {"type": "string"}},
    ],
}
_ERRORS = {
    "400": "Invalid parameters or body.",
    "401": "No credentials, or wrong ones.",
    "403": "Authenticated, but this role, key or business-line scope may not.",
    "404": "No such object.",
}
_BODY_ERRORS = {"415": "A content type (or encoding, or charset) this operation does not read."}
# Only where an operation says so in its own description (ingest's rate limit and body limits).
_MENTIONED = {
    "408": "The body did not arrive in time.",
    "413": "The body is too large.",
    "429": "Over the rate limit; Retry-After says when to try again.",
}
_RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the Error component and the error answers of each operation."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for item in result.get("paths", {}).values():
        operations = {m: op for m, op in item.items() if m in {"get", "post", "put", "patch", "delete"}}
        for operation in operations.values():
            _add_errors(operation, content)
        if any(p.get("name") == "format" for op in operations.values() for p in op.get("parameters", [])):
            for operation in operations.values():
                _add_csv(operation)
    return result


def _add_errors(operation: dict[str, Any], content: dict[str, Any]) -> None:
    errors = dict(_ERRORS)
    if "requestBody" in operation:
        errors.update(_BODY_ERRORS)
    description = operation.get("description", "")
    errors.update({code: text for code, text in _MENTIONED.items() if f"{code} " in description})
    responses = operation.setdefault("responses", {})
    for code, text in errors.items():
        answer: dict[str, Any] = {"description": text, "content": dict(content)}  # a copy: _add_csv adds to it
        if code == "429":
            answer["headers"] = _RETRY_AFTER
        responses.setdefault(code, answer)


def _add_csv(operation: dict[str, Any]) -> None:
    """`?format=csv` renders any answer of the view as CSV (a table's rows, or an error), and the
    renderer applies to every method of the path."""
    for response in operation.get("responses", {}).values():
        response.setdefault("content", {}).setdefault("text/csv", {"schema": {"type": "string"}})
