"""API errors as values: each is a Kubernetes `Status` with a code, a reason and a field path.

Development emulator, not for production. Only the HTTP layer turns an `ApiError` into a response;
every other module raises one of the constructors below, so the wording mirrors kube-apiserver's
in one place (clients such as kubectl and kopf branch on `code` and `reason`, people read `message`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cause:
    """One entry of `details.causes`: which field was wrong and why."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


@dataclass(frozen=True)
class ApiError(Exception):
    """The root of every error the emulator's API server returns."""

    code: int
    reason: str
    message: str
    kind: str = ""
    name: str = ""
    group: str = ""
    causes: tuple[Cause, ...] = field(default=())

    def __str__(self) -> str:
        return self.message

    def status(self) -> dict:
        """The `Status` body kube-apiserver would send."""
        body: dict = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": self.message, "reason": self.reason, "code": self.code}
        details: dict = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [{k: v for k, v in (("reason", c.reason), ("message", c.message), ("field", c.field))
                                  if v} for c in self.causes]
        if details:
            body["details"] = details
        return body


@dataclass(frozen=True)
class Undecodable(ApiError):
    """A value Go's JSON decoder refuses: 400 in a request body, 422 in the object a patch
    produces (apiserver/pkg/endpoints/handlers/patch.go), which is why it is a type of its own."""

    why: str = ""
    """The decoder's own words, without the create and update handlers' preamble (a patch's 422 quotes them)."""


def malformed(message: str) -> Undecodable:
    """A body no JSON decoder would take at all (too deep, not JSON's values)."""
    return Undecodable(400, "BadRequest", message, why=message)


def undecodable(kind: str, version: str, why: str) -> Undecodable:
    """A value the decoder refuses for a Go type: `why` in encoding/json's words."""
    return Undecodable(400, "BadRequest", f'{kind} in version "{version}" cannot be handled as a {kind}: {why}',
                       why=why)


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(plural, group)} "{name}" not found', plural, name, group)


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{_qualified(plural, group)} "{name}" already exists',
                    plural, name, group)


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
                    plural, name, group)


def stale(plural: str, group: str, name: str) -> ApiError:
    return conflict(plural, group, name,
                    "the object has been modified; please apply your changes to the latest version and try again")


def invalid(kind: str, group: str, name: str, causes: tuple[Cause, ...]) -> ApiError:
    text = ", ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes)
    text = f"[{text}]" if len(causes) > 1 else text  # upstream's aggregate error
    return ApiError(422, "Invalid", f'{kind}{"." + group if group else ""} "{name}" is invalid: {text}',
                    kind, name, group, causes)


def unprocessable(message: str) -> ApiError:
    """A patch the server could not apply (a failed JSON Patch `test`, a bad path)."""
    return ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: {message}")


def gone(rv: int, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {rv} ({oldest})")


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def too_large(message: str) -> ApiError:
    """k8s.io/apimachinery/pkg/api/errors NewRequestEntityTooLargeError: a body or a patch over a limit."""
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: {message}")


def internal(message: str) -> ApiError:
    """NewInternalError: what a bug answers with, as a Status, rather than a dropped connection."""
    return ApiError(500, "InternalError", f"Internal error occurred: {message}",
                    causes=(Cause("", message, ""),))


def forbidden(message: str, plural: str = "", group: str = "", name: str = "") -> ApiError:
    return ApiError(403, "Forbidden", message, plural, name, group)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str, accepted: tuple[str, ...]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format ({content_type}) - accepted media types "
                    f"include: {', '.join(accepted)}")


def apply_refused(accepted: tuple[str, ...]) -> ApiError:
    """Server-side apply: refused rather than approximated (there are no managedFields to own fields)."""
    return ApiError(415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format (application/apply-patch+yaml): server-side "
                    "apply is not emulated by the liveplex emulator (it keeps no managedFields, so it cannot tell "
                    "which fields a manager owns); use client-side `kubectl apply` (without --server-side) or a merge "
                    f"patch - accepted media types include: {', '.join(accepted)}")


def protobuf_refused(content_type: str) -> ApiError:
    """A protobuf body: the emulator speaks JSON only, and says so rather than failing to parse it."""
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format ({content_type}): the liveplex emulator speaks "
                    "JSON only; send application/json (with kubectl, write the object as a manifest and `kubectl "
                    "apply -f` or `kubectl create -f` it: kubectl sends manifests as JSON) - accepted media types "
                    "include: application/json, application/yaml")


def no_route(path: str) -> ApiError:
    return ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
