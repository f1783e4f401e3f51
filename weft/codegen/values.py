"""Loop values (``weft.lower.values``) printed as C expressions of type ``long``."""

from __future__ import annotations

from weft.lower.values import LoopValue, Minimum, Product, Quotient, Remainder, Sum, Var


def c_value(value: LoopValue, bare: bool = False) -> str:
    """``value`` as C; ``bare`` leaves a top-level sum unparenthesised (an argument)."""
    match value:
        case bool():
            raise TypeError(f"a loop value is an integer, not {value!r}")
        case int():
            return str(value)
        case Var(name):
            return name
        case Sum(left, right):
            text = f"{c_value(left)} + {c_value(right)}"
            return text if bare else f"({text})"
        case Product(inner, factor):
            return f"({c_value(inner)} * {factor})"
        case Quotient(inner, divisor):
            return f"({c_value(inner)} / {divisor})"
        case Remainder(inner, modulus):
            return f"({c_value(inner)} % {modulus})"
        case Minimum(left, right):
            return f"wfc_minl({c_value(left, True)}, {c_value(right, True)})"
    raise TypeError(f"not a loop value: {value!r}")
