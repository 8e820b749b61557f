"""``{name}`` in a ``%%mcp`` request: the value of a notebook variable, as a Python literal.

The sandbox cannot see the notebook's variables, so their values travel in the request: each
``{name}`` becomes ``repr(value)``, capped so that a large object cannot flood the prompt, and the
model is told these are values to use, not instructions. ``{{`` and ``}}`` stand for literal
braces, as in ``str.format``; braces around anything but a name are left as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cemcp_kernel.errors import CemcpError

MAX_REPR = 200
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


class InterpolationError(CemcpError):
    """A ``{name}`` with no notebook variable behind it."""


@dataclass
class Interpolated:
    text: str
    values: dict[str, str] = field(default_factory=dict)  # name -> the literal put in its place


def short_repr(value: Any, limit: int = MAX_REPR) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not break the cell
        text = f"<{type(value).__name__} whose repr failed: {exc}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def interpolate(text: str, namespace: Mapping[str, Any]) -> Interpolated:
    """Replace each ``{name}`` by its value's short repr; raise naming every missing variable."""
    values: dict[str, str] = {}
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        token, name = match.group(0), match.group(1)
        if name is None:
            return token[0]  # "{{" -> "{", "}}" -> "}"
        if name not in namespace:
            missing.append(name)
            return token
        values[name] = short_repr(namespace[name])
        return values[name]

    result = _FIELD.sub(replace, text)
    if missing:
        names = ", ".join(f"{{{n}}}" for n in dict.fromkeys(missing))
        raise InterpolationError(
            f"The request uses {names}, but the notebook has no such variable. Define it in a "
            "cell first, or write {{ and }} for literal braces."
        )
    return Interpolated(result, values)
