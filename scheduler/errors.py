"""Errors the engine raises for configuration and requests that can never be valid."""

from __future__ import annotations


class ConfigurationError(ValueError):
    """A cluster or VC configuration the engine refuses.

    ``cell_type``, ``level`` (leaf = 1), ``shortfall`` (in cells of ``cell_type``) and
    ``chain`` (the leaf SKU of the chain) are set when the error is about capacity; for
    structural errors they are ``None``/0 and the message says what is wrong.
    """

    def __init__(
        self,
        message: str,
        *,
        cell_type: str | None = None,
        level: int | None = None,
        shortfall: int = 0,
        chain: str | None = None,
    ) -> None:
        super().__init__(message)
        self.cell_type = cell_type
        self.level = level
        self.shortfall = shortfall
        self.chain = chain


class InvalidRequestError(ValueError):
    """A gang request that no state of the cluster could ever satisfy.

    ``field`` names the offending part of the job in the OpenPAI protocol's terms,
    e.g. ``taskRoles.worker.skuType``.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
