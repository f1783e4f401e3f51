"""Measures the error of Weft's float32 transcendentals against float64 references.

Run ``python -m weft.mathf.accuracy [--samples N] [--seed S]``; it prints the
Markdown table kept in docs/math.md. Errors are in units in the last place (ulp)
of the float32 binade of the exact (float64) result, so a correctly rounded
result scores at most 0.5; results below the normal range are measured in the
denormal spacing 2^-149. A result equal to the float64 reference rounded to
float32 scores 0 (this covers infinities and exact specials); a NaN where the
reference is not NaN (or the reverse) scores infinity.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

from weft import mathf
from weft.mathf.definitions import TRIG_INPUT_MAX

REFERENCES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "erf": special.erf,
    "sigmoid": special.expit,
    "sin": lambda x: np.where(np.abs(x) <= TRIG_INPUT_MAX, np.sin(x), np.nan),  # NaN beyond, by definition
    "cos": lambda x: np.where(np.abs(x) <= TRIG_INPUT_MAX, np.cos(x), np.nan),
}

# The bounds docs/math.md states (max ulp over all float32 inputs, exhaustively
# measured by ``python -m weft.codegen.exhaustive``); tests assert them.
STATED_MAX_ULP: dict[str, float] = {"exp": 1.0, "log": 1.0, "tanh": 2.0, "erf": 2.0, "sigmoid": 2.5, "sin": 1.0, "cos": 1.0}

# Where each function does something other than saturate: sampled densely.
CORE_DOMAINS: dict[str, tuple[float, float]] = {
    "exp": (-104.0, 89.0),
    "log": (0.0, 16.0),
    "tanh": (-10.0, 10.0),
    "erf": (-4.5, 4.5),
    "sigmoid": (-105.0, 20.0),
    "sin": (-1e5, 1e5),  # rotary tables: positions (up to ~1e5) times frequencies up to 1
    "cos": (-1e5, 1e5),
}

SPECIALS = np.array(
    [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        1.0,
        -1.0,
        2.0**-149,
        -(2.0**-149),
        2.0**-126,
        np.finfo(np.float32).max,
        -np.finfo(np.float32).max,
        88.72283935546875,
        -87.33654022216797,
        -103.97208,
        0.625,
        1.0 - 2.0**-24,
        4.0,
        4194304.0,
        4194304.5,
        1.5707963705062866,
        3.1415927410125732,
    ],
    dtype=np.float32,
)


def ulp_error(result: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|result - reference| in ulps of float32 at the reference (float64) value."""
    result = np.asarray(result, dtype=np.float32)
    reference = np.asarray(reference, dtype=np.float64)
    with np.errstate(all="ignore"):
        _, exponent = np.frexp(reference)
        ulp = np.ldexp(1.0, np.clip(exponent - 24, -149, 104))
        error = np.abs(result.astype(np.float64) - reference) / ulp
        rounded = reference.astype(np.float32)
    same = (result == rounded) | (np.isnan(result) & np.isnan(reference))
    error = np.where(same, 0.0, error)
    return np.where(np.isnan(error), np.inf, error)


def sample_inputs(name: str, count: int, seed: int = 0) -> np.ndarray:
    """Half uniform over the core domain, half uniform float32 bit patterns, plus specials."""
    rng = np.random.default_rng(seed)
    low, high = CORE_DOMAINS[name]
    core = rng.uniform(low, high, count // 2).astype(np.float32)
    patterns = rng.integers(0, 0x7F800000, count - count // 2, dtype=np.uint32).view(np.float32)
    signs = np.where(rng.random(patterns.size) < 0.5, np.float32(-1.0), np.float32(1.0))
    if name == "log":  # negative inputs only ever give NaN; keep a few
        signs = np.where(rng.random(patterns.size) < 0.02, np.float32(-1.0), np.float32(1.0))
    return np.concatenate([core, patterns * signs, SPECIALS])


@dataclass(frozen=True)
class AccuracyRow:
    name: str
    samples: int
    max_ulp: float
    worst_input: float
    mean_ulp: float
    fraction_correctly_rounded: float


def measure(name: str, count: int = 2_000_000, seed: int = 0) -> AccuracyRow:
    """Max and mean ulp error of ``mathf.<name>`` over ``sample_inputs(name, count, seed)``."""
    inputs = sample_inputs(name, count, seed)
    result = getattr(mathf, name)(inputs)
    with np.errstate(all="ignore"):
        reference = REFERENCES[name](inputs.astype(np.float64))
    errors = ulp_error(result, reference)
    worst = int(np.argmax(errors))
    with np.errstate(all="ignore"):
        rounded = reference.astype(np.float32)
    exact = (result == rounded) | (np.isnan(result) & np.isnan(rounded))
    return AccuracyRow(
        name=name,
        samples=inputs.size,
        max_ulp=float(errors[worst]),
        worst_input=float(inputs[worst]),
        mean_ulp=float(errors.mean()),
        fraction_correctly_rounded=float(exact.mean()),
    )


def markdown_table(rows: list[AccuracyRow]) -> str:
    lines = [
        "| function | samples | max ulp | worst input | mean ulp | correctly rounded |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.name} | {row.samples:,} | {row.max_ulp:.3f} | {row.worst_input!r} |"
            f" {row.mean_ulp:.4f} | {100 * row.fraction_correctly_rounded:.2f}% |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2_000_000, help="inputs per function")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = [measure(name, args.samples, args.seed) for name in REFERENCES]
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
