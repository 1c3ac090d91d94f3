"""Kubernetes resource quantities (`500m`, `2Gi`, `1e3`), parsed the way the API server does."""

import re
from decimal import Decimal, InvalidOperation

# The API server's own pattern for a quantity string.
QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")

_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


class QuantityError(ValueError):
    pass


def parse_quantity(value) -> Decimal:
    """The numeric value of a quantity; raises QuantityError for what the server rejects."""
    if isinstance(value, bool):
        raise QuantityError(value)
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(value)
    match = QUANTITY_RE.match(value)
    if not match:
        raise QuantityError(value)
    number, suffix = match.groups()
    try:
        if suffix in _SUFFIXES:
            return Decimal(number) * _SUFFIXES[suffix]
        if suffix[:1] in "eE":
            return Decimal(number) * (Decimal(10) ** int(suffix[1:]))
        return Decimal(number + suffix)
    except (InvalidOperation, ValueError) as exc:
        raise QuantityError(value) from exc


def format_quantity(value: Decimal) -> str:
    """A plain decimal string for a quantity (quota `used` values), integral when possible."""
    if value == value.to_integral_value():
        return str(int(value))
    millis = value * 1000
    if millis == millis.to_integral_value():
        return f"{int(millis)}m"
    return str(value.normalize())
