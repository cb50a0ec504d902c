"""Does the live object already say what we want? (So a no-op reconcile writes nothing.)

The API server adds defaults and bookkeeping to everything we apply, so equality is the wrong
test; "every field we render has the same value live" is the right one. Lists must match element
by element (same length), since a removed container or port is a real change. Quantities compare
by value, because the API server canonicalises them (``0.5`` → ``500m``).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIX = {
    None: Decimal(1),
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


def parse_quantity(value: object) -> Decimal | None:
    """A Kubernetes quantity as a number, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value.strip())
    if not m:
        return None
    try:
        number = Decimal(m.group(1))
    except InvalidOperation:
        return None
    suffix = m.group(2)
    if suffix and suffix[0] in "eE":
        return number * (Decimal(10) ** int(suffix[1:]))
    return number * _SUFFIX[suffix]


def _scalar_equal(want: object, have: object) -> bool:
    if want == have:
        return True
    a, b = parse_quantity(want), parse_quantity(have)
    return a is not None and b is not None and a == b


def first_difference(want: Any, have: Any, path: str = "") -> str | None:
    """The first path where ``have`` does not contain ``want``; None when it does."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return path or "."
        for key, value in want.items():
            if key not in have:
                return f"{path}.{key}"
            found = first_difference(value, have[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return path or "."
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            found = first_difference(w, h, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if _scalar_equal(want, have) else (path or ".")


def contains(want: Any, have: Any) -> bool:
    return first_difference(want, have) is None
