"""The shape every adapter failure takes: a type name (which becomes the Temporal ApplicationError
type), a message free of credentials, and whether retrying can help."""

from __future__ import annotations


class TypedError(Exception):
    def __init__(self, type: str, message: str, *, retryable: bool, status: int | None = None):
        super().__init__(message)
        self.type = type
        self.message = message
        self.retryable = retryable
        self.status = status

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"
