"""Your own program as a workload: ``weft bench my_model.py:build --set hidden=256``.

A *program* is a function ``FUNCTION(**params)`` in a Python file that returns
``(fn, inputs)`` or ``(fn, inputs, torch_fn)``:

- ``fn``: a callable over ``weft.nn`` tensors (what ``weft.trace`` runs);
- ``inputs``: example NumPy arrays, a dict (``fn(**inputs)``) or a tuple / list
  (``fn(*inputs)``); each entry may itself be a pytree (dict, list, tuple) of
  arrays, and ``fn`` gets the same structure holding tensors;
- ``torch_fn`` (optional): the same computation over ``torch`` tensors, called
  the same way, for the ``torch-eager`` and ``torch-compile`` arms.

``params`` are FUNCTION's keyword parameters with defaults (bool, int, float or
str): they are the ``--set KEY=VALUE`` sizes. ``FUNCTION.sequence_param = "tokens"``
names the parameter ``weft diagnose`` doubles for its memory-scaling step.

    def build(tokens=128, hidden=384):
        rng = np.random.default_rng(0)
        x = rng.standard_normal((tokens, hidden), dtype=np.float32)
        w = rng.standard_normal((hidden, hidden), dtype=np.float32) / hidden**0.5
        return (lambda x, w: weft.nn.gelu(x @ w.T)), {"x": x, "w": w}
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from weft.arguments import describe_value, flatten, map_leaves, unflatten
from weft.errors import DTypeError, WeftError, WorkloadError
from weft.ir import Plan
from weft.nn.tensor import as_dtype
from weft.workloads.base import Workload

DEFAULT_FUNCTION = "build"
SETTABLE_TYPES = (bool, int, float, str)
RESERVED_PARAMETERS = ("seed",)
_CACHE_SIZE = 4  # (params -> built program) kept per workload: diagnose builds two sizes


def is_program_reference(text: object) -> bool:
    """True when ``text`` names a Python file (``model.py`` or ``model.py:FUNCTION``)."""
    if not isinstance(text, str):
        return False
    path = text.rpartition(":")[0] if ":" in text else text
    return path.endswith(".py")


def _load_module(path: Path):
    """Import the file at ``path`` once per content (its directory on sys.path while it runs)."""
    source = path.read_bytes()
    module_name = f"weft_program_{path.stem}_{hashlib.sha256(str(path).encode() + source).hexdigest()[:12]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise WorkloadError(f"program {path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    folder = str(path.parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except WeftError:
        del sys.modules[module_name]
        raise
    except Exception as error:  # noqa: BLE001 - any failure of the user's file, reported with its cause
        del sys.modules[module_name]
        raise WorkloadError(f"program {path}: importing it failed: {type(error).__name__}: {error}") from error
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    return module


def load_program(reference: str) -> Workload:
    """The workload for ``FILE.py:FUNCTION`` (FUNCTION defaults to ``build``).

    A missing file, a missing or non-callable FUNCTION, or a parameter without a
    default is a ``WorkloadError`` naming the fix."""
    path_text, sep, function_name = reference.rpartition(":")
    if not sep or not path_text.endswith(".py"):
        path_text, function_name = reference, DEFAULT_FUNCTION
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise WorkloadError(f"program {path_text}: no such file (give FILE.py:FUNCTION, e.g. examples/bert.py:build)")
    path = path.resolve()
    module = _load_module(path)
    function = getattr(module, function_name, None)
    if function is None or not callable(function):
        defined = sorted(name for name, value in vars(module).items()
                         if inspect.isfunction(value) and value.__module__ == module.__name__ and not name.startswith("_"))
        what = "is not callable" if function is not None else "is not defined"
        raise WorkloadError(f"program {path_text}: {function_name} {what} there; functions defined: "
                            f"{', '.join(defined) or 'none'} (FUNCTION(**params) must return (fn, inputs))")
    return program_workload(function, name=f"{path.name}:{function_name}", source=f"{path}:{function_name}")


def _settable_defaults(function: Callable, name: str) -> dict[str, object]:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return {}
    defaults: dict[str, object] = {}
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if parameter.name in RESERVED_PARAMETERS:
            raise WorkloadError(f"program {name}: parameter {parameter.name!r} is reserved (weft bench --seed seeds"
                                " the built-in workloads' inputs); rename it, e.g. weights_seed")
        if parameter.default is inspect.Parameter.empty:
            raise WorkloadError(f"program {name}: parameter {parameter.name!r} has no default; every parameter of "
                                "the program function is a --set size and needs one (e.g. tokens=128)")
        if isinstance(parameter.default, SETTABLE_TYPES):
            defaults[parameter.name] = parameter.default
    return defaults


class BuiltProgram:
    """One call of a program function, checked: the traced plan, its arrays, its twin."""

    def __init__(self, name: str, returned: object) -> None:
        if not isinstance(returned, tuple | list) or len(returned) not in (2, 3):
            raise WorkloadError(f"program {name} must return (fn, inputs) or (fn, inputs, torch_fn), got "
                                f"{describe_value(returned)}")
        fn, inputs = returned[0], returned[1]
        self.torch_fn = returned[2] if len(returned) == 3 else None
        if not callable(fn):
            raise WorkloadError(f"program {name}: the first item returned must be the function to trace, got "
                                f"{describe_value(fn)}")
        if self.torch_fn is not None and not callable(self.torch_fn):
            raise WorkloadError(f"program {name}: the third item returned must be a PyTorch function (or absent), "
                                f"got {describe_value(self.torch_fn)}")
        if not isinstance(inputs, Mapping | tuple | list):
            raise WorkloadError(f"program {name}: inputs must be a dict (fn(**inputs)) or a tuple of arrays "
                                f"(fn(*inputs)), got {describe_value(inputs)}")
        for path, leaf in flatten(inputs):
            if not isinstance(leaf, np.ndarray):
                raise WorkloadError(f"program {name}: input {path} must be a numpy.ndarray, got {describe_value(leaf)}")
            try:
                as_dtype(leaf.dtype)
            except DTypeError as error:
                raise WorkloadError(f"program {name}: input {path} is {describe_value(leaf)}: {error}") from None
        self.fn, self.inputs, self.name = fn, inputs, name
        self._plan: Plan | None = None

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The example arrays in the plan's input order (the flatten order of ``inputs``)."""
        if isinstance(self.inputs, Mapping):
            return tuple(leaf for key in self.keyword_order() for _, leaf in flatten(self.inputs[key], key))
        return tuple(leaf for _, leaf in flatten(list(self.inputs)))

    def keyword_order(self) -> list[str]:
        """A dict's keys in ``fn``'s parameter order (the order ``weft.trace`` gives the inputs)."""
        try:
            order = list(inspect.signature(self.fn).parameters)
        except (TypeError, ValueError):
            order = []
        return sorted(self.inputs, key=lambda key: order.index(key) if key in order else len(order))

    def plan(self) -> Plan:
        if self._plan is None:
            from weft.nn import spec, trace

            def as_spec(_, array: np.ndarray):
                return spec(array.shape, array.dtype)

            specs = map_leaves(self.inputs, as_spec)
            plan_name = self.name.rpartition(":")[2] or self.name
            if isinstance(specs, Mapping):
                self._plan = trace(self.fn, name=plan_name, **specs)
            else:
                self._plan = trace(self.fn, *specs, name=plan_name)
        return self._plan

    def torch_callable(self) -> Callable | None:
        """The twin over flat torch tensors (the plan's input order), or None."""
        if self.torch_fn is None:
            return None
        twin, inputs = self.torch_fn, self.inputs
        if isinstance(inputs, Mapping):
            keys = self.keyword_order()

            def call_with_keywords(*tensors):
                rebuilt, start = {}, 0
                for key in keys:
                    count = len(flatten(inputs[key]))
                    rebuilt[key] = unflatten(inputs[key], tensors[start:start + count])
                    start += count
                return twin(**rebuilt)

            return call_with_keywords

        def call_positionally(*tensors):
            return twin(*unflatten(list(inputs), tensors))

        return call_positionally


def program_workload(function: Callable[..., object] | None = None, *, name: str, source: str | None = None,
                     built: tuple | None = None) -> Workload:
    """A ``Workload`` over a program function (``FUNCTION(**params) -> (fn, inputs[, torch_fn])``),
    or over one already-built ``(fn, inputs[, torch_fn])`` (``built``, no parameters).

    ``source`` (``/abs/path.py:FUNCTION``) lets fresh processes load it again
    (``weft bench --processes``); in-memory programs have none."""
    if (function is None) == (built is None):
        raise WorkloadError("program_workload takes a program function or a built (fn, inputs), not both")
    defaults = _settable_defaults(function, name) if function is not None else {}
    cache: dict[tuple, BuiltProgram] = {}

    def build_program(**params: object) -> BuiltProgram:
        key = tuple(sorted(params.items()))
        if key not in cache:
            try:
                returned = function(**params) if function is not None else built
            except WeftError:
                raise
            except Exception as error:  # noqa: BLE001 - the user's function failed: say where
                raise WorkloadError(f"program {name}({', '.join(f'{k}={v!r}' for k, v in params.items())}) "
                                    f"failed: {type(error).__name__}: {error}") from error
            if len(cache) >= _CACHE_SIZE:
                cache.pop(next(iter(cache)))
            cache[key] = BuiltProgram(name, returned)
        return cache[key]

    def make_inputs(rng: np.random.Generator, **params: object) -> tuple[np.ndarray, ...]:
        del rng  # a program's inputs are the arrays it returned (its own seed decides them)
        return build_program(**params).arrays

    sequence_param = getattr(function, "sequence_param", None) if function is not None else None
    if sequence_param is not None and sequence_param not in defaults:
        raise WorkloadError(f"program {name}: sequence_param={sequence_param!r} is not one of its int parameters "
                            f"({', '.join(defaults) or 'none'})")
    doc = inspect.getdoc(function) if function is not None else None
    return Workload(
        name=name,
        description=(doc or f"the program {name}").splitlines()[0],
        defaults=defaults,
        small=dict(defaults),
        sequence_param=sequence_param,
        build=lambda **params: build_program(**params).plan(),
        make_inputs=make_inputs,
        make_torch=lambda **params: build_program(**params).torch_callable(),
        source=source,
    )


__all__ = ["BuiltProgram", "is_program_reference", "load_program", "program_workload"]
