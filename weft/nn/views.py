"""Views: index maps onto a source, never members.

Each function returns a Tensor whose read function rewrites the index and calls
the source's read function, so ``x.transpose(1, 2).reshape(...)[..., :4]`` still
reads ``x`` directly inside whichever member consumes it. Only ``concat`` and the
padded reads (window partition of a ragged grid) need a ``where`` or a padded
Load; they are still no member of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from weft.errors import AxisError, ShapeError
from weft.ir import (
    Binary,
    BinaryOp,
    Const,
    DType,
    Expr,
    IndexConst,
    IndexExpr,
    IndexValue,
    Load,
    Where,
)
from weft.ir.indexing import reshape_index
from weft.nn.tensor import Tensor, TraceError, current_tracer

IndexMap = Callable[[tuple[IndexExpr, ...]], tuple[IndexExpr, ...]]


def view(source: Tensor, shape: Sequence[int], index_map: IndexMap) -> Tensor:
    """A tensor of ``shape`` reading ``source`` at ``index_map(index)``."""
    read = source.read
    return Tensor(tuple(shape), source.dtype, source.tracer, lambda index: read(index_map(tuple(index))), None)


def normalize_axis(op: str, axis: int, shape: tuple[int, ...], allow_end: bool = False) -> int:
    """``axis`` as a non-negative position; ``AxisError`` naming the op and shape."""
    rank = len(shape) + (1 if allow_end else 0)
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise AxisError(
            f"{op}: axis {axis} is out of range for shape {shape} (rank {len(shape)});"
            f" use an axis in [{-rank}, {rank - 1}]"
        )
    return axis % rank


def normalize_axes(op: str, axes: int | Sequence[int] | None, shape: tuple[int, ...]) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(len(shape)))
    if isinstance(axes, int):
        axes = (axes,)
    result = tuple(normalize_axis(op, a, shape) for a in axes)
    if len(set(result)) != len(result):
        raise AxisError(f"{op}: axes {tuple(axes)} repeat an axis of shape {shape}")
    return result


def reshape(x: Tensor, *shape: int | Sequence[int]) -> Tensor:
    """Row-major reshape (one extent may be -1); reads the source through a grouped flat index."""
    dims = list(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else list(shape)
    unknown = [n for n, d in enumerate(dims) if d == -1]
    known = 1
    for d in dims:
        if d != -1:
            known *= d
    if len(unknown) > 1 or any(d < -1 for d in dims):
        raise ShapeError(f"reshape: target shape {tuple(dims)} is invalid (extents >= 0, at most one -1)")
    if unknown and known == 0:
        raise ShapeError(f"reshape: cannot reshape {x.shape} into {tuple(dims)}: with a 0 extent beside it, the -1"
                         " could be any size; give every extent")
    if unknown:
        if x.size % known:
            raise ShapeError(f"reshape: cannot reshape {x.shape} ({x.size} elements) into {tuple(dims)}")
        dims[unknown[0]] = x.size // known
    target = tuple(dims)
    if known * (dims[unknown[0]] if unknown else 1) != x.size:
        raise ShapeError(
            f"reshape: cannot reshape {x.shape} ({x.size} elements) into {target}"
            f" ({known} elements); the element counts must match"
        )
    if target == x.shape:
        return x
    source = x.shape
    if x.size == 0:  # no element is ever read: any in-form index will do
        return view(x, target, lambda index: tuple(IndexConst(0) for _ in source))
    return view(x, target, lambda index: reshape_index(source, target, index))


def flatten(x: Tensor, start: int = 0, end: int = -1) -> Tensor:
    """Merge dims ``start..end`` into one; a 0-d tensor becomes shape (1,) (PyTorch)."""
    if x.ndim == 0:
        if start not in (0, -1) or end not in (0, -1):
            raise AxisError(f"flatten: dims ({start}, {end}) are out of range for a 0-d tensor; use 0 or -1")
        return reshape(x, (1,))
    start, end = normalize_axis("flatten", start, x.shape), normalize_axis("flatten", end, x.shape)
    middle = 1
    for d in x.shape[start:end + 1]:
        middle *= d
    return reshape(x, x.shape[:start] + (middle,) + x.shape[end + 1:])


def permute(x: Tensor, *order: int | Sequence[int]) -> Tensor:
    """Reorder dimensions: output dim ``n`` is source dim ``order[n]``."""
    dims = tuple(order[0]) if len(order) == 1 and not isinstance(order[0], int) else tuple(order)
    if len(dims) != x.ndim:
        raise AxisError(f"permute: order {dims} has {len(dims)} axes but the tensor has shape {x.shape}")
    dims = normalize_axes("permute", dims, x.shape)
    inverse = [0] * x.ndim
    for position, d in enumerate(dims):
        inverse[d] = position
    return view(x, tuple(x.shape[d] for d in dims), lambda index: tuple(index[inverse[d]] for d in range(len(dims))))


def transpose(x: Tensor, axis0: int = -2, axis1: int = -1) -> Tensor:
    """Swap two dimensions (default: the last two). As in PyTorch, a tensor of rank below 2
    may name its own dims (0 or -1): nothing to swap."""
    if x.ndim < 2 and axis0 in (0, -1) and axis1 in (0, -1):
        return x
    if x.ndim < 2:
        raise AxisError(f"transpose: needs at least 2 dimensions, got shape {x.shape}")
    a, b = normalize_axis("transpose", axis0, x.shape), normalize_axis("transpose", axis1, x.shape)
    order = list(range(x.ndim))
    order[a], order[b] = order[b], order[a]
    return permute(x, order)


def expand(x: Tensor, *shape: int | Sequence[int]) -> Tensor:
    """Broadcast to ``shape`` (PyTorch ``expand``: -1 keeps an extent)."""
    dims = list(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else list(shape)
    offset = len(dims) - x.ndim
    if offset < 0:
        raise ShapeError(f"expand: cannot expand shape {x.shape} to fewer dimensions {tuple(dims)}")
    for d, extent in enumerate(x.shape):
        if dims[offset + d] == -1:
            dims[offset + d] = extent
        if extent != 1 and extent != dims[offset + d]:
            raise ShapeError(
                f"expand: shape {x.shape} cannot expand to {tuple(dims)}: dimension {d} has extent"
                f" {extent}, only extent-1 dimensions can grow"
            )
    target = tuple(dims)
    source = x.shape
    return view(x, target, lambda index: tuple(
        IndexConst(0) if extent == 1 and target[offset + d] != 1 else index[offset + d]
        for d, extent in enumerate(source)
    ))


broadcast_to = expand


def unsqueeze(x: Tensor, axis: int) -> Tensor:
    axis = normalize_axis("unsqueeze", axis, x.shape, allow_end=True)
    return reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])


def squeeze(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """Drop size-1 dims (all of them, or those of ``axis``). As in PyTorch, a listed dim
    whose extent is not 1 is left as it is (a no-op, not an error), and a 0-d tensor
    takes dim 0 or -1."""
    if x.ndim == 0:
        listed = () if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
        if any(a not in (0, -1) for a in listed):
            raise AxisError(f"squeeze: dim {listed} is out of range for a 0-d tensor; use 0 or -1")
        return x
    if axis is None:
        axes = tuple(d for d, n in enumerate(x.shape) if n == 1)
    else:
        axes = tuple(a for a in normalize_axes("squeeze", axis, x.shape) if x.shape[a] == 1)
    return reshape(x, tuple(n for d, n in enumerate(x.shape) if d not in axes))


def slice_axis(x: Tensor, axis: int, start: int | None = None, stop: int | None = None, step: int = 1) -> Tensor:
    """``x`` restricted to ``start:stop:step`` along ``axis`` (Python slice rules)."""
    axis = normalize_axis("slice", axis, x.shape)
    if step == 0:
        raise ShapeError("slice: step must not be 0")
    begin, end, stride = slice(start, stop, step).indices(x.shape[axis])
    positions = range(begin, end, stride)
    shape = x.shape[:axis] + (len(positions),) + x.shape[axis + 1:]
    return view(x, shape, lambda index: index[:axis] + (index[axis] * stride + begin,) + index[axis + 1:])


def getitem(x: Tensor, key: object) -> Tensor:
    """Basic NumPy indexing: ints, slices, ``None`` and ``...``; no tensor indices."""
    items = list(key) if isinstance(key, tuple) else [key]
    if any(isinstance(i, Tensor) for i in items):
        raise TraceError(
            "indexing with a Tensor is a gather: use weft.nn.embedding(ids, table) to pick rows of a 2-D"
            " table by integer ids (weft.nn has no general take_along_axis)"
        )
    if sum(i is Ellipsis for i in items) > 1:
        raise AxisError(f"getitem: more than one '...' in index {key!r}")
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > x.ndim:
        raise AxisError(f"getitem: index {key!r} has {used} entries but the tensor has shape {x.shape}")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (x.ndim - used)
    else:
        items += [slice(None)] * (x.ndim - used)
    result, dim, final = x, 0, []
    for item in items:
        if item is None:
            final.append(1)
            continue
        if isinstance(item, slice):
            result = slice_axis(result, dim, item.start, item.stop, 1 if item.step is None else item.step)
            final.append(result.shape[dim])
            dim += 1
        elif isinstance(item, int):
            extent = result.shape[dim]
            if not -extent <= item < extent:
                raise AxisError(f"getitem: index {item} is out of range for axis {dim} of shape {x.shape}")
            result = slice_axis(result, dim, item % extent, item % extent + 1)
            dim += 1
        else:
            raise TraceError(f"getitem: unsupported index {item!r}; use ints, slices, None or ...")
    return reshape(result, tuple(final))


def read_padded(tensor: Tensor, index: tuple[IndexExpr, ...], padding: float = 0.0) -> Expr:
    """Read ``tensor`` at an index that may leave its range, returning ``padding`` there.

    A whole buffer reads through a padded Load; a view guards with ``where`` and
    wraps the index (``% extent``) so the view's own map never leaves its source."""
    if tensor.buffer is not None:
        return Load(tensor.buffer, tuple(index), padding)
    inside: Expr | None = None
    wrapped = []
    for position, extent in zip(index, tensor.shape, strict=True):
        value = IndexValue(position)
        check = Binary(BinaryOp.AND, Binary(BinaryOp.GE, value, Const(0, DType.INT64)),
                       Binary(BinaryOp.LT, value, Const(extent, DType.INT64)))
        inside = check if inside is None else Binary(BinaryOp.AND, inside, check)
        wrapped.append(position % extent)
    fill = Const(float(padding) if tensor.dtype.is_float else int(padding), tensor.dtype)
    if tensor.dtype is DType.BOOL:
        fill = Const(bool(padding), DType.BOOL)
    body = tensor.read(tuple(wrapped))
    return body if inside is None else Where(inside, body, fill)


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join along ``axis``: each part is read (padded outside its range) where the index falls in it."""
    parts = list(tensors)
    if not parts:
        raise ShapeError("concat: needs at least one tensor")
    current_tracer(*parts)
    if any(part.shape != (0,) for part in parts):  # PyTorch skips 1-D empty pieces of any rank (legacy)
        parts = [part for part in parts if part.shape != (0,)]
    first = parts[0]
    axis = normalize_axis("concat", axis, first.shape)
    for other in parts[1:]:
        if other.ndim != first.ndim or any(
            a != b for d, (a, b) in enumerate(zip(first.shape, other.shape, strict=True)) if d != axis
        ):
            raise ShapeError(
                f"concat: shapes {first.shape} and {other.shape} differ outside axis {axis};"
                " every other dimension must match"
            )
        if other.dtype is not first.dtype:
            raise ShapeError(f"concat: dtypes differ ({first.dtype.value} vs {other.dtype.value})")
    parts = [part for part in parts if part.shape[axis]] or parts[:1]  # empty pieces add nothing
    first = parts[0]
    if len(parts) == 1:
        return first
    offsets = []
    total = 0
    for part in parts:
        offsets.append(total)
        total += part.shape[axis]
    shape = first.shape[:axis] + (total,) + first.shape[axis + 1:]

    def read(index: tuple[IndexExpr, ...]) -> Expr:
        position = IndexValue(index[axis])
        body = None
        for part, offset in reversed(list(zip(parts, offsets, strict=True))):
            shifted = index[:axis] + (index[axis] - offset,) + index[axis + 1:]
            value = read_padded(part, shifted)
            if body is None:
                body = value
            else:
                limit = Const(offset + part.shape[axis], DType.INT64)
                body = Where(Binary(BinaryOp.LT, position, limit), value, body)
        return body

    return Tensor(shape, first.dtype, first.tracer, read, None)


def window_partition(x: Tensor, window: int) -> Tensor:
    """(B, H, W, C) -> (B * nH * nW, window, window, C), zero-padding a ragged grid
    (SAM / ViTDet ``window_partition``)."""
    if x.ndim != 4:
        raise ShapeError(f"window_partition: needs (B, H, W, C), got shape {x.shape}")
    if window < 1:
        raise ShapeError(f"window_partition: window must be >= 1, got {window}")
    batch, height, width, channels = x.shape
    rows, cols = -(-height // window), -(-width // window)
    shape = (batch * rows * cols, window, window, channels)

    def source(index: tuple[IndexExpr, ...]) -> tuple[IndexExpr, ...]:
        w, y, z, c = index
        return (w // (rows * cols), (w // cols) % rows * window + y, w % cols * window + z, c)

    if height % window == 0 and width % window == 0:
        return view(x, shape, source)
    return Tensor(shape, x.dtype, x.tracer, lambda index: read_padded(x, source(tuple(index))), None)


def window_unpartition(windows: Tensor, window: int, height: int, width: int) -> Tensor:
    """Inverse of ``window_partition``: (B * nH * nW, window, window, C) -> (B, H, W, C),
    dropping the padding."""
    rows, cols = -(-height // window), -(-width // window)
    if windows.ndim != 4 or windows.shape[1:3] != (window, window) or windows.shape[0] % (rows * cols):
        raise ShapeError(
            f"window_unpartition: shape {windows.shape} is not (B*{rows}*{cols}, {window}, {window}, C)"
            f" for a {height}x{width} grid"
        )
    batch = windows.shape[0] // (rows * cols)
    shape = (batch, height, width, windows.shape[3])

    def source(index: tuple[IndexExpr, ...]) -> tuple[IndexExpr, ...]:
        b, h, w, c = index
        return (b * (rows * cols) + (h // window) * cols + w // window, h % window, w % window, c)

    return view(windows, shape, source)
