"""The ``Workload`` record and the helpers every built-in workload shares.

A workload is a traced plan plus matching random inputs, sized by named
parameters. ``plan`` only traces (fast at any size, allocates nothing big);
``inputs`` makes the arrays; ``torch_fn`` is the best PyTorch version of the same
computation, imported lazily so Weft never needs torch.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from weft.errors import WorkloadError
from weft.ir import Plan
from weft.nn import Spec, trace


@dataclass(frozen=True)
class Workload:
    """A named, parameterised computation: plan, inputs and a PyTorch twin."""

    name: str
    description: str
    defaults: dict[str, object]
    small: dict[str, object]
    sequence_param: str | None
    build: Callable[..., Plan] = field(repr=False)
    make_inputs: Callable[..., tuple[np.ndarray, ...]] = field(repr=False)
    make_torch: Callable[..., Callable | None] | None = field(default=None, repr=False)
    check: Callable[[dict[str, object]], None] | None = field(default=None, repr=False)
    # how a fresh process loads this workload again (``/abs/model.py:build`` for a
    # program; None: by ``name`` for a built-in, not at all for an in-memory program)
    source: str | None = None
    # output -> input pairs a Weft arm writes in place (``weft.compile(in_place=...)``) for
    # these params, or {} (a state-updating workload's ``in_place`` parameter asks for them)
    make_in_place: Callable[..., dict[str, str]] | None = field(default=None, repr=False)

    def resolve(self, **params: object) -> dict[str, object]:
        """Defaults overridden by ``params``; strings are parsed to the default's type.

        Unknown names or unparsable values raise ``WorkloadError`` naming the valid ones."""
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            valid = ", ".join(f"{k}={v}" for k, v in self.defaults.items())
            raise WorkloadError(f"workload {self.name}: unknown parameter(s) {', '.join(unknown)}; valid: {valid}")
        resolved = dict(self.defaults)
        for key, value in params.items():
            resolved[key] = _coerce(self.name, key, value, self.defaults[key])
        if self.check is not None:
            self.check(resolved)
        return resolved

    def plan(self, **params: object) -> Plan:
        """The traced plan (no arrays are allocated)."""
        return self.build(**self.resolve(**params))

    def inputs(self, seed: int = 0, **params: object) -> tuple[np.ndarray, ...]:
        """Random inputs in the plan's input order (float32 unless an index)."""
        return self.make_inputs(np.random.default_rng(seed), **self.resolve(**params))

    def in_place(self, **params: object) -> dict[str, str]:
        """The (output -> input) pairs Weft arms write over their inputs for ``params``: {}
        unless the workload defines them and its parameters ask for them."""
        if self.make_in_place is None:
            return {}
        return self.make_in_place(**self.resolve(**params))

    def torch_fn(self, **params: object) -> Callable | None:
        """A callable over torch tensors made from ``inputs()`` (same order) returning
        the plan's outputs (same order), or None where torch has no equivalent."""
        if self.make_torch is None:
            return None
        return self.make_torch(**self.resolve(**params))


def _coerce(workload: str, key: str, value: object, default: object) -> object:
    expected = type(default)
    if isinstance(value, str) and expected is not str:
        text = value.strip().lower()
        try:
            if expected is bool:
                if text not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                    raise ValueError(value)
                return text in ("true", "1", "yes", "on")
            if expected is int:
                return int(text.replace("_", ""))
            if expected is float:
                return float(text)
        except ValueError:
            raise WorkloadError(
                f"workload {workload}: parameter {key}={value!r} is not a valid {expected.__name__}"
                f" (default {default!r})"
            ) from None
    if expected is bool and isinstance(value, int | np.integer) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)  # --set flag=1, parsed as a number first
    if expected is bool and not isinstance(value, bool | np.bool_):
        raise WorkloadError(f"workload {workload}: parameter {key} must be a bool, got {value!r}")
    if expected is int and (isinstance(value, bool) or not isinstance(value, int | np.integer)):
        raise WorkloadError(f"workload {workload}: parameter {key} must be an int, got {value!r}")
    if expected is float and not isinstance(value, int | float | np.number):
        raise WorkloadError(f"workload {workload}: parameter {key} must be a number, got {value!r}")
    return expected(value)


def require(workload: str, condition: bool, message: str) -> None:
    if not condition:
        raise WorkloadError(f"workload {workload}: {message}")


def positive(workload: str, params: Mapping[str, object], *names: str) -> None:
    for name in names:
        require(workload, params[name] >= 1, f"parameter {name} must be >= 1, got {params[name]}")


def trace_named(body: Callable[..., object], names: Sequence[str], specs: Sequence[Spec], plan_name: str) -> Plan:
    """Trace ``body(*tensors)`` with inputs named ``names`` (for variable input lists)."""

    def traced(*tensors):
        return body(*tensors)

    parameters = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
    traced.__signature__ = inspect.Signature(parameters)
    return trace(traced, *specs, name=plan_name)


def normal(rng: np.random.Generator, shape: Sequence[int], scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    """float32 N(offset, scale^2) drawn directly in float32 (no float64 temporary)."""
    out = rng.standard_normal(tuple(shape), dtype=np.float32)
    if scale != 1.0:
        out *= np.float32(scale)
    if offset:
        out += np.float32(offset)
    return out


def weight(rng: np.random.Generator, out_features: int, in_features: int) -> np.ndarray:
    """A (out, in) weight ~ N(0, 1/in): unit-variance activations stay unit variance."""
    return normal(rng, (out_features, in_features), 1.0 / np.sqrt(in_features))


def rope_tables(positions: np.ndarray, pairs: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin (len(positions), pairs) for frequencies theta^(-p/pairs), in float64 then float32."""
    frequencies = theta ** (-np.arange(pairs, dtype=np.float64) / pairs)
    angles = np.outer(positions.astype(np.float64), frequencies)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def lazy_torch():
    """Import torch, with a clear error when it is absent."""
    try:
        import torch
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise WorkloadError("this needs PyTorch (pip install torch); Weft itself does not") from error
    return torch
