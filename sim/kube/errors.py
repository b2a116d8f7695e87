"""API errors as a real API server sends them: a `Status` object whose `reason` and `code` the
`kubernetes` client turns into an `ApiException` with the right status."""

from __future__ import annotations

from typing import Any


class KubeError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(qualified: str, name: str | None) -> dict[str, Any]:
    plural, _, group = qualified.partition(".")
    out: dict[str, Any] = {"kind": plural}
    if group:
        out["group"] = group
    if name:
        out["name"] = name
    return out


def not_found(qualified: str, name: str) -> KubeError:
    return KubeError(404, "NotFound", f'{qualified} "{name}" not found', _details(qualified, name))


def already_exists(qualified: str, name: str) -> KubeError:
    return KubeError(409, "AlreadyExists", f'{qualified} "{name}" already exists', _details(qualified, name))


def stale(qualified: str, name: str) -> KubeError:
    return KubeError(
        409, "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(qualified, name),
    )


def invalid(kind_qualified: str, name: str, causes: list[dict[str, str]]) -> KubeError:
    """422 Invalid; each cause names its field, and the message lists them like the API server."""
    texts = [f'{c["field"]}: {c["message"]}' for c in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    kind, _, group = kind_qualified.partition(".")
    details: dict[str, Any] = {"name": name, "kind": kind, "causes": causes}
    if group:
        details["group"] = group
    return KubeError(422, "Invalid", f'{kind_qualified} "{name}" is invalid: {joined}', details)


def bad_request(message: str) -> KubeError:
    return KubeError(400, "BadRequest", message)


def unauthorized() -> KubeError:
    return KubeError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> KubeError:
    return KubeError(405, "MethodNotAllowed", message)


def unsupported_media(content_type: str) -> KubeError:
    return KubeError(415, "UnsupportedMediaType",
                     "the body of the request was in an unknown format - accepted media types include: "
                     "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml "
                     f"(got {content_type!r})")


def internal(message: str) -> KubeError:
    return KubeError(500, "InternalError", f"Internal error occurred: {message}")
