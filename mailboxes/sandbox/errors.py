"""AgentMail-shaped error responses: `{"name", "code", "message", "docs"}` (+ `errors`)."""

from __future__ import annotations

from typing import Any

DOCS = "https://docs.agentmail.to/errors#"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        name: str | None = None,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.name = name or NAMES.get(status, "ApiError")
        self.errors = errors
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "code": self.code, "message": self.message}
        if self.errors is not None:
            out["errors"] = self.errors
        out["docs"] = DOCS + self.code
        return out

    @classmethod
    def validation(cls, message: str, path: list[Any] | None = None) -> ApiError:
        return cls(
            400,
            "validation_error",
            message,
            errors=[{"path": path or [], "message": message}],
        )

    @classmethod
    def not_found(cls, what: str) -> ApiError:
        return cls(404, "not_found", f"{what} not found")

    @classmethod
    def forbidden(cls, message: str = "Forbidden") -> ApiError:
        return cls(403, "forbidden", message)

    @classmethod
    def conflict(cls, message: str) -> ApiError:
        return cls(409, "conflict", message)


NAMES = {
    400: "ValidationError",
    401: "UnauthorizedError",
    403: "ForbiddenError",
    404: "NotFoundError",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}
