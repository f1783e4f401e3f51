"""Symbolic tensors and ``trace``: run a Python function, record members, get a Plan.

A ``Tensor`` is a shape, a dtype and a *read function*: given one index
expression per dimension it returns the body expression that reads that element.
An input or a member's output reads ``Load(buffer, index)``; a view (transpose,
reshape, slice, broadcast, window partition...) wraps its source's read function
with an index map, so views never create members. A member is emitted only where
computation happens (``Tracer.emit``); its Load indices are simplified against its
own axis extents so composed maps print (and analyse) as plain affine maps.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from weft.arguments import describe_value, flatten, map_leaves
from weft.errors import DTypeError, ShapeError, WeftError
from weft.ir import (
    Axis,
    AxisIndex,
    Buffer,
    Const,
    DType,
    Expr,
    Fold,
    IndexExpr,
    Kernel,
    Load,
    Plan,
    Role,
    verify,
)
from weft.ir.indexing import simplify_expr

ReadFn = Callable[[tuple[IndexExpr, ...]], Expr]


class TraceError(WeftError):
    """``weft.trace`` was misused: wrong number of specs, a non-tensor result,
    Python control flow on a symbolic value, or tensors from another trace."""


_DTYPE_NAMES = {
    "float32": DType.FLOAT32, "f32": DType.FLOAT32,
    "int32": DType.INT32, "i32": DType.INT32,
    "int64": DType.INT64, "i64": DType.INT64,
    "bool": DType.BOOL,
}


def as_dtype(dtype: object, op: str = "weft.spec") -> DType:
    """Map 'float32', numpy dtypes or ``DType`` onto ``DType``; else ``DTypeError``."""
    if isinstance(dtype, DType):
        return dtype
    try:
        name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    except TypeError:
        name = str(dtype)
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    raise DTypeError(
        f"{op}: dtype {name!r} is not supported; use one of float32, int32, int64, bool"
        " (cast half or double precision data to float32 first: x.astype(numpy.float32), or"
        " tensor.float() in PyTorch)"
    )


@dataclass(frozen=True, slots=True)
class Spec:
    """Describes one traced input: its shape, dtype and whether it is a parameter."""

    shape: tuple[int, ...]
    dtype: DType = DType.FLOAT32
    param: bool = False


def spec(shape: Sequence[int] | int, dtype: object = "float32", param: bool = False) -> Spec:
    """An input description for ``weft.trace``: ``weft.spec((4096, 1024))``.

    ``param=True`` marks a weight (role PARAM) rather than an activation.
    """
    if isinstance(shape, int | np.integer):
        shape = (int(shape),)
    if hasattr(shape, "shape") and hasattr(shape, "dtype") and (
            len(shape.shape) != 1 or not np.issubdtype(np.dtype(shape.dtype), np.integer)):
        raise ShapeError(f"weft.spec takes a shape, got {describe_value(shape)}; for an array x pass"
                         " weft.spec(x.shape, x.dtype)")
    try:
        dims = tuple(int(n) for n in shape)
    except TypeError:
        raise ShapeError(f"weft.spec: shape must be a tuple of ints, got {describe_value(shape)}") from None
    if any(n < 0 for n in dims):
        raise ShapeError(f"weft.spec: shape {dims} has a negative extent; extents are >= 0 (0: an empty tensor)")
    return Spec(dims, as_dtype(dtype), bool(param))


class Tensor:
    """A symbolic tensor inside a trace. Operators build members through ``weft.nn``."""

    __slots__ = ("shape", "dtype", "tracer", "read", "buffer")
    __array_priority__ = 1000  # numpy scalars on the left defer to our operators

    def __init__(self, shape: tuple[int, ...], dtype: DType, tracer: Tracer, read: ReadFn, buffer: str | None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.tracer = tracer
        self.read = read
        self.buffer = buffer  # set when this tensor is a whole buffer, not a view of one

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        what = self.buffer or "view"
        return f"Tensor({what}, shape={self.shape}, dtype={self.dtype.value})"

    def __bool__(self) -> bool:
        raise TraceError(
            "a symbolic Tensor has no truth value during tracing: Python `if`/`while` on tensor"
            " data cannot be traced; use weft.nn.where(condition, a, b)"
        )

    def __len__(self) -> int:
        if not self.shape:
            raise TraceError("len() of a 0-d Tensor")
        return self.shape[0]

    def __iter__(self):
        """Views of ``x[0], x[1], ...`` (NumPy semantics: ``q, k, v = qkv``); no members."""
        if not self.shape:
            raise TraceError("iteration over a 0-d Tensor")
        return (self[position] for position in range(self.shape[0]))

    # ---- NumPy's protocols: refused at once. Without these NumPy would treat a Tensor as a
    # sequence and trace one scalar member per element (np.exp on a (64, 384) Tensor ran 76 s).

    def __array__(self, dtype=None, copy=None):
        raise TraceError(
            f"{self!r} is symbolic: it has no values while tracing, so NumPy cannot convert it to an"
            " array; use weft.nn functions inside weft.trace, and get arrays by running the plan"
            " (weft.oracle.run or weft.compile)"
        )

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = getattr(ufunc, "__name__", str(ufunc))
        operator = _NUMPY_OPERATORS.get(name)
        if operator is not None and method == "__call__" and not kwargs and len(inputs) == 2:
            # a Python operator with a NumPy scalar or array on the left (np.float32(2) * x):
            # the same as Tensor's reflected operator
            return _NN[operator](*inputs)
        raise TraceError(_numpy_refusal(f"numpy.{name}{'' if method == '__call__' else '.' + method}", name))

    def __array_function__(self, func, types, args, kwargs):
        name = getattr(func, "__name__", str(func))
        raise TraceError(_numpy_refusal(f"numpy.{name}", name))


# numpy ufuncs Python operators reach (ndarray.__mul__ calls numpy.multiply): delegated
_NUMPY_OPERATORS = {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
    "power": "pow", "matmul": "matmul", "less": "less", "less_equal": "less_equal",
    "greater": "greater", "greater_equal": "greater_equal",
}
# numpy (and scipy.special) names whose weft.nn function is named differently
_WEFT_EQUIVALENT = {
    "negative": "neg", "absolute": "abs", "fabs": "abs", "subtract": "sub", "multiply": "mul",
    "divide": "div", "true_divide": "div", "power": "pow", "amax": "max", "amin": "min",
    "concatenate": "concat", "expand_dims": "unsqueeze", "expit": "sigmoid", "bitwise_and": "logical_and",
    "bitwise_or": "logical_or", "invert": "logical_not", "stack": "concat", "take": "embedding",
    "exp2": "exp", "einsum": "matmul", "dot": "matmul", "astype": "cast", "float_power": "pow",
}


def _numpy_refusal(what: str, name: str) -> str:
    equivalent = _WEFT_EQUIVALENT.get(name, name)
    if equivalent in _NN.get("__all__", ()):
        advice = f"use weft.nn.{equivalent} instead"
    else:
        advice = f"weft.nn has no {name}: build it from weft.nn functions (listed in weft.nn.__all__)"
    return f"{what} was applied to a symbolic weft Tensor, which NumPy cannot compute on; {advice}"


def _operator(functions: Mapping[str, Callable], name: str, reflected: bool = False):
    def method(self, other):
        function = functions[name]
        return function(other, self) if reflected else function(self, other)

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


_NN: Mapping[str, Callable] = {}
"""``weft.nn``'s namespace, handed over by ``_install_methods`` (nn imports this module, not
the other way round)."""


def _install_methods(functions: Mapping[str, Callable]) -> None:
    """Operators and methods delegate to the functions of ``weft.nn`` (which passes its own
    namespace once everything is defined: nn imports this module, not the other way)."""
    global _NN
    _NN = functions
    pairs = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "matmul": "matmul", "pow": "pow"}
    for dunder, name in pairs.items():
        setattr(Tensor, f"__{dunder}__", _operator(functions, name))
        setattr(Tensor, f"__r{dunder}__", _operator(functions, name, reflected=True))
    for dunder, name in {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}.items():
        setattr(Tensor, f"__{dunder}__", _operator(functions, name))
    for dunder, name in {"and": "logical_and", "or": "logical_or"}.items():
        setattr(Tensor, f"__{dunder}__", _operator(functions, name))

    def delegate(name: str):
        def method(self, *args, **kwargs):
            return functions[name](self, *args, **kwargs)

        method.__name__ = name
        return method

    for name in ("reshape", "permute", "transpose", "expand", "sum", "max", "min", "mean",
                 "exp", "log", "sqrt", "tanh", "sigmoid", "squeeze", "unsqueeze", "flatten"):
        setattr(Tensor, name, delegate(name))
    Tensor.__neg__ = delegate("neg")
    Tensor.__abs__ = delegate("abs")
    Tensor.__invert__ = delegate("logical_not")
    Tensor.__getitem__ = delegate("getitem")
    Tensor.astype = delegate("cast")
    Tensor.T = property(lambda self: delegate("permute")(self, tuple(reversed(range(self.ndim)))))


_CURRENT: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("weft_tracer", default=None)
_SCOPES: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("weft_name_scope", default=())
_NAME_OK = re.compile(r"[^A-Za-z0-9_]")


@contextlib.contextmanager
def name_scope(prefix: str) -> Iterator[None]:
    """Prefix the names of members emitted inside: ``with name_scope("layer3"):`` gives
    ``layer3_attn_scores``. Scopes nest (``layer3_mlp_up``)."""
    clean = _NAME_OK.sub("_", str(prefix)).strip("_")
    token = _SCOPES.set(_SCOPES.get() + ((clean,) if clean else ()))
    try:
        yield
    finally:
        _SCOPES.reset(token)


class Tracer:
    """Records members in program order while a traced function runs."""

    def __init__(self) -> None:
        self.kernels: list[Kernel] = []
        self.dtypes: dict[str, DType] = {}
        self.inputs: list[Buffer] = []
        self.names: set[str] = set()

    def unique(self, label: str) -> str:
        base = "_".join(_SCOPES.get() + (_NAME_OK.sub("_", label),))
        name, count = base, 1
        while name in self.names:
            count += 1
            name = f"{base}_{count}"
        self.names.add(name)
        return name

    def buffer_tensor(self, name: str, shape: tuple[int, ...], dtype: DType) -> Tensor:
        return Tensor(shape, dtype, self, lambda index: Load(name, tuple(index)), name)

    def add_input(self, name: str, item: Spec) -> Tensor:
        self.names.add(name)
        role = Role.PARAM if item.param else Role.INPUT
        self.inputs.append(Buffer(name, item.shape, item.dtype, role))
        return self.buffer_tensor(name, item.shape, item.dtype)

    def emit(
        self,
        label: str,
        axes: Sequence[Axis],
        body: Expr,
        dtype: DType,
        fold: Fold | None = None,
    ) -> Tensor:
        """Record one member writing a new buffer; return the tensor that reads it."""
        name = self.unique(label)
        extents = {axis.name: axis.extent for axis in tuple(axes) + (fold.axes if fold else ())}
        if any(axis.extent == 0 for axis in axes):  # an empty output: nothing to compute, nothing to read
            body, fold = Const(False if dtype is DType.BOOL else 0.0 if dtype.is_float else 0, dtype), None
        kernel = Kernel(name, tuple(axes), simplify_expr(body, extents), fold)
        self.kernels.append(kernel)
        self.dtypes[name] = dtype
        return self.buffer_tensor(name, kernel.shape, dtype)


def current_tracer(*tensors: object) -> Tracer:
    """The tracer the given tensors belong to (all must agree) or the active one."""
    tracer = None
    for value in tensors:
        if isinstance(value, Tensor):
            if tracer is not None and value.tracer is not tracer:
                raise TraceError("tensors from two different weft.trace calls were combined")
            tracer = value.tracer
    tracer = tracer or _CURRENT.get()
    if tracer is None:
        raise TraceError("weft.nn functions run only inside weft.trace(fn, *specs)")
    return tracer


def axes_for(shape: Sequence[int], prefix: str = "i") -> tuple[Axis, ...]:
    return tuple(Axis(f"{prefix}{n}", extent) for n, extent in enumerate(shape))


def axis_index(axes: Sequence[Axis]) -> tuple[IndexExpr, ...]:
    return tuple(AxisIndex(axis.name) for axis in axes)


def materialize(tensor: Tensor, label: str = "copy") -> Tensor:
    """A member copying ``tensor`` into its own buffer (for outputs that are views)."""
    axes = axes_for(tensor.shape)
    return tensor.tracer.emit(label, axes, tensor.read(axis_index(axes)), tensor.dtype)


def _parameter_names(fn: Callable, count: int, keywords: Sequence[str] = ()) -> list[str]:
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    names: list[str] = []
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            names += [f"{parameter.name}{n}" for n in range(count - len(names))]
            break
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(parameter.name)
    name = getattr(fn, "__name__", "fn")
    if len(names) < count:
        raise TraceError(f"weft.trace: {name} takes {len(names)} positional inputs but {count} specs were given")
    required = [p for p in parameters if p.default is inspect.Parameter.empty and p.name not in keywords
                and p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if len(required) > count:
        raise TraceError(f"weft.trace: {name} needs {len(required)} inputs but {count} specs were given")
    return names[:count]


def _check_spec(name: str, item: object) -> Spec:
    if isinstance(item, Spec):
        return item
    if hasattr(item, "shape") and hasattr(item, "dtype"):
        shape, dtype = tuple(item.shape), getattr(item.dtype, "name", item.dtype)
        raise TraceError(
            f"weft.trace: input {name} is {describe_value(item)}, not a spec; describe it with"
            f" weft.spec({shape}, {str(dtype)!r})"
        )
    raise TraceError(f"weft.trace: input {name} must be described with weft.spec(shape, dtype), got {describe_value(item)}")


def _keyword_order(fn: Callable, keywords: dict[str, object], positional: Sequence[str]) -> list[str]:
    """Keyword specs in ``fn``'s parameter order; a name ``fn`` cannot take is a TraceError."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        parameters = {}
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    for key in keywords:
        if key in positional:
            raise TraceError(f"weft.trace: input {key} was given both positionally and by keyword")
        known = key in parameters and parameters[key].kind is not inspect.Parameter.POSITIONAL_ONLY
        if parameters and not known and not accepts_any:
            fn_name = getattr(fn, "__name__", "fn")
            raise TraceError(f"weft.trace: {fn_name} has no parameter {key!r}; parameters: {', '.join(parameters)}")
    order = list(parameters)
    return sorted(keywords, key=lambda key: order.index(key) if key in order else len(order))


def trace(fn: Callable[..., object], *specs: object, name: str | None = None, **named_specs: object) -> Plan:
    """Run ``fn`` over symbolic tensors described by ``specs``; return its verified Plan.

    Each spec argument is a ``weft.spec`` or a pytree of them (a dict, list or tuple:
    ``fn`` receives the same structure holding tensors); keyword specs are passed to
    ``fn`` by keyword. Inputs are named after ``fn``'s parameters and, inside a pytree,
    the keys / positions (``weights_wq``; see ``weft.arguments``). Outputs are what
    ``fn`` returns (a tensor or a tuple of tensors). Members not needed by any output
    are dropped; an output that is a view (or an input) gets a copy member so a member
    writes it.
    """
    if not callable(fn):
        raise TraceError(f"weft.trace: the first argument is the function to trace, got {describe_value(fn)}")
    tracer = Tracer()
    positional_names = _parameter_names(fn, len(specs), tuple(named_specs))
    keyword_names = _keyword_order(fn, named_specs, positional_names)
    tops = list(zip(positional_names, specs, strict=True)) + [(key, named_specs[key]) for key in keyword_names]
    seen: set[str] = set()
    for top, tree in tops:
        for leaf_name, _ in flatten(tree, top):
            if leaf_name in seen:
                raise TraceError(f"weft.trace: two inputs would both be named {leaf_name!r}; rename a key")
            seen.add(leaf_name)

    def make_input(leaf_name: str, item: object) -> Tensor:
        return tracer.add_input(leaf_name, _check_spec(leaf_name, item))

    trees = {top: map_leaves(tree, make_input, top) for top, tree in tops}
    token = _CURRENT.set(tracer)
    try:
        result = fn(*(trees[n] for n in positional_names), **{key: trees[key] for key in keyword_names})
    finally:
        _CURRENT.reset(token)
    results = tuple(result) if isinstance(result, tuple | list) else (result,)
    if not results or not all(isinstance(r, Tensor) for r in results):
        raise TraceError(f"weft.trace: the function must return a Tensor or a tuple of Tensors, got "
                         f"{describe_value(result)}")
    input_names = {b.name for b in tracer.inputs}
    outputs: list[str] = []
    for tensor in results:
        if tensor.tracer is not tracer:
            raise TraceError("weft.trace: the function returned a tensor from another trace")
        if tensor.buffer is None or tensor.buffer in input_names or tensor.buffer in outputs:
            tensor = materialize(tensor, "out")
        outputs.append(tensor.buffer)
    return verify(_build_plan(tracer, outputs, name or getattr(fn, "__name__", "plan")))


def _build_plan(tracer: Tracer, outputs: list[str], name: str) -> Plan:
    """Keep members reachable from the outputs; assign buffer roles."""
    needed = set(outputs)
    kept: list[Kernel] = []
    for kernel in reversed(tracer.kernels):
        if kernel.output in needed:
            kept.append(kernel)
            needed.update(kernel.reads)
    kept.reverse()
    buffers = list(tracer.inputs)
    output_set = set(outputs)
    for kernel in kept:
        role = Role.OUTPUT if kernel.output in output_set else Role.INTERMEDIATE
        buffers.append(Buffer(kernel.output, kernel.shape, tracer.dtypes[kernel.output], role))
    clean_name = _NAME_OK.sub("_", name).strip("_") or "plan"
    return Plan(tuple(buffers), tuple(kept), tuple(b.name for b in tracer.inputs), tuple(outputs), clean_name)
