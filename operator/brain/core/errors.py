"""Errors that reach a person or an agent: each has a stable code and a message that names the field."""

from __future__ import annotations


class BrainError(Exception):
    """Base class; `code` is machine-readable, `status` the HTTP status the REST API answers with."""

    code = "brain_error"
    status = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(BrainError):
    code = "invalid_input"
    status = 422


class NotFound(BrainError):
    code = "not_found"
    status = 404


class Conflict(BrainError):
    """Compare-and-set failed: somebody changed the entry first."""

    code = "conflict"
    status = 409


class SecretRejected(BrainError):
    """The secret gate refused a value; the message names detector types, never the secret."""

    code = "secret_rejected"
    status = 422


class InstructionRejected(BrainError):
    """The lint refused a body that reads like instructions to agents (memory is data)."""

    code = "instruction_rejected"
    status = 422


class Forbidden(BrainError):
    code = "forbidden"
    status = 403


class Unauthorized(BrainError):
    code = "unauthorized"
    status = 401


class KeyStoreUnavailable(BrainError):
    """The key could not be checked: the key database is down and this key has no recent verdict.

    A 503, not a 401: the key may be perfectly good, and an agent told "unauthorized" gives up or
    asks its user for a new key, where it should retry (`Retry-After`)."""

    code = "key_store_unavailable"
    status = 503


class SchemaMismatch(BrainError):
    """The database was created for another embedding dimension or a newer schema: unavailable to
    this build until it is upgraded (or the database reindexed), never a fault in the request."""

    code = "schema_mismatch"
    status = 503
