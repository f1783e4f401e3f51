"""Makers for the view functions (reshape, permute, expand, slices, concat, windows).

Views make no member of their own: a maker often follows one with a cheap elementwise
op so the composition engine sees the view inside a member's body.
"""

from __future__ import annotations

from weft.fuzz.generate import BOOL, FLOAT, INT32, Builder, Value
from weft.fuzz.program import Dim, Dims, Index, Ref, Refs


def _refs(*values: Value) -> tuple[Ref, ...]:
    return tuple(Ref(v.name) for v in values)


def _any(b: Builder, min_rank: int = 0, max_rank: int = 4) -> Value:
    return b.operand(b.rng.choice([FLOAT, FLOAT, FLOAT, INT32, BOOL]), min_rank, max_rank)


def _materialise(b: Builder, view: Value) -> Value:
    """Views make no member: often follow one with a cheap elementwise op so fusion sees it."""
    if b.chance(0.5) and view.dtype == FLOAT:
        return b.emit(b.rng.choice(["tanh", "neg", "sigmoid"]), _refs(view), {}, view.shape, FLOAT, False)
    return view


def make_reshape(b: Builder, fn: str) -> Value:
    x = _any(b, 1)
    shape = list(x.shape)
    roll = b.rng.random()
    if roll < 0.3 and len(shape) >= 2:
        at = b.rng.randrange(len(shape) - 1)
        shape[at:at + 2] = [f"{shape[at]}*{shape[at + 1]}"]
    elif roll < 0.55 and any("*" in e for e in shape):
        at = next(n for n, e in enumerate(shape) if "*" in e)
        first, rest = shape[at].split("*", 1)
        shape[at:at + 1] = [first, rest]
    elif roll < 0.75:
        shape.insert(b.rng.randint(0, len(shape)), "1")
    else:
        shape = ["*".join(shape)]
    target = list(shape)
    if b.chance(0.2):
        target[b.rng.randrange(len(target))] = "-1"
    if fn == "flatten":
        start = b.rng.randrange(len(x.shape))
        end = b.rng.randrange(start, len(x.shape))
        flat = x.shape[:start] + ("*".join(x.shape[start:end + 1]),) + x.shape[end + 1:]
        view = b.emit("flatten", (Ref(x.name), start, end), {}, flat, x.dtype, x.exact)
    else:
        view = b.emit("reshape", (Ref(x.name), Dims(tuple(target))), {}, tuple(shape), x.dtype, x.exact)
    return _materialise(b, view)


def make_permute(b: Builder, fn: str) -> Value:
    x = _any(b, 2)
    rank = len(x.shape)
    if fn == "transpose":
        a, c = b.rng.sample(range(rank), 2)
        order = list(range(rank))
        order[a], order[c] = order[c], order[a]
        args = (Ref(x.name),) if (a, c) in ((rank - 2, rank - 1), (rank - 1, rank - 2)) and b.chance(0.3) else \
            (Ref(x.name), a - rank if b.chance(0.3) else a, c)
    else:
        order = list(range(rank))
        b.rng.shuffle(order)
        args = (Ref(x.name), tuple(order))
    view = b.emit(fn, args, {}, tuple(x.shape[d] for d in order), x.dtype, x.exact)
    return _materialise(b, view)


def make_expand(b: Builder, fn: str) -> Value:
    x = _any(b, 0, 3)
    if "1" not in x.shape and x.shape:
        x = b.new_input(tuple(e if b.chance(0.5) else "1" for e in x.shape), x.dtype)
    room = max(1, b.budget.elements // max(1, b.size(x.shape)))
    target, args = [], []
    for e in x.shape:
        if e == "1" and room > 1:
            grown = b.new_dim(high=min(64, room))
            room = max(1, room // b.dims[grown])
            target.append(grown)
            args.append(grown)
        else:
            target.append(e)
            args.append("-1" if b.chance(0.3) else e)
    if b.chance(0.4) and room > 1:
        lead = b.new_dim(high=min(8, room))
        target.insert(0, lead)
        args.insert(0, lead)
    view = b.emit(fn, (Ref(x.name), Dims(tuple(args))), {}, tuple(target), x.dtype, x.exact)
    return _materialise(b, view)


def make_squeeze(b: Builder, fn: str) -> Value:
    x = _any(b, 0, 3)
    if fn == "unsqueeze":
        axis = b.rng.randint(-len(x.shape) - 1, len(x.shape))
        position = axis % (len(x.shape) + 1)
        shape = x.shape[:position] + ("1",) + x.shape[position:]
        return _materialise(b, b.emit(fn, (Ref(x.name), axis), {}, shape, x.dtype, x.exact))
    ones = [d for d, e in enumerate(x.shape) if e == "1"]
    if not ones:
        x = b.new_input(b.new_shape(b.rng.randint(0, 2)) + ("1",), x.dtype)
        ones = [len(x.shape) - 1]
    if b.chance(0.5):
        args = (Ref(x.name), b.rng.choice(ones))
        dropped = {args[1]}
    else:
        args = (Ref(x.name),)
        dropped = {d for d, e in enumerate(x.shape) if e == "1"}
        dropped |= {d for d, e in enumerate(x.shape) if b.size((e,)) == 1}
    shape = tuple(e for d, e in enumerate(x.shape) if d not in dropped)
    return _materialise(b, b.emit(fn, args, {}, shape, x.dtype, x.exact))


def _slice_bounds(b: Builder, size: int) -> tuple[int | None, int | None, int]:
    step = b.rng.choice([1, 1, 1, 2, 3])
    start = b.rng.choice([None, 0, b.rng.randrange(size), -b.rng.randint(1, size)])
    stop = b.rng.choice([None, size, b.rng.randint(1, size), -b.rng.randint(0, size - 1) or None])
    if len(range(*slice(start, stop, step).indices(size))) == 0:
        return None, None, step
    return start, stop, step


def _sliced(b: Builder, expr: str, bounds) -> str:
    size = b.size((expr,))
    count = len(range(*slice(*bounds).indices(size)))
    return expr if count == size else str(count)


def make_slice(b: Builder, fn: str) -> Value:
    x = _any(b, 1)
    axis = b.rng.randrange(len(x.shape))
    bounds = _slice_bounds(b, b.size((x.shape[axis],)))
    shape = x.shape[:axis] + (_sliced(b, x.shape[axis], bounds),) + x.shape[axis + 1:]
    args = (Ref(x.name), axis - len(x.shape) if b.chance(0.3) else axis, *bounds)
    return _materialise(b, b.emit(fn, args, {}, shape, x.dtype, x.exact))


def make_getitem(b: Builder, fn: str) -> Value:
    x = _any(b, 1)
    items, shape = [], []
    use_ellipsis = b.chance(0.3)
    used = b.rng.randint(1, len(x.shape))
    for expr in x.shape[:used]:
        roll = b.rng.random()
        size = b.size((expr,))
        if roll < 0.25:
            items.append(b.rng.choice([0, size - 1, -1]))
        elif roll < 0.35:
            items.append(None)
            shape.append("1")
            items.append((None, None, None))
            shape.append(expr)
        else:
            bounds = _slice_bounds(b, size)
            items.append(bounds)
            shape.append(_sliced(b, expr, bounds))
    if use_ellipsis:
        items.append("...")
    shape.extend(x.shape[used:])
    return _materialise(b, b.emit(fn, (Ref(x.name), Index(tuple(items))), {}, tuple(shape), x.dtype, x.exact))


def make_concat(b: Builder, fn: str) -> Value:
    x = _any(b, 1, 3)
    axis = b.rng.randrange(len(x.shape))
    parts = [x]
    for _ in range(b.rng.randint(1, 2)):
        if b.chance(0.5):
            parts.append(b.new_input(x.shape, x.dtype))
        else:
            grown = b.new_dim(high=40)
            parts.append(b.new_input(x.shape[:axis] + (grown,) + x.shape[axis + 1:], x.dtype))
    if b.size(x.shape) * len(parts) > 2 * b.budget.elements:
        parts = parts[:2]
    extents = [p.shape[axis] for p in parts]
    total = f"{len(parts)}*{extents[0]}" if len(set(extents)) == 1 else str(sum(b.size((e,)) for e in extents))
    shape = x.shape[:axis] + (total,) + x.shape[axis + 1:]
    kwargs = {"axis": axis} if axis or b.chance(0.5) else {}
    view = b.emit(fn, (Refs(tuple(p.name for p in parts)),), kwargs, shape, x.dtype, all(p.exact for p in parts))
    return _materialise(b, view)


def _window_source(b: Builder) -> tuple[Value, int]:
    window = b.rng.choice([1, 2, 3, 4, 7])
    found = b.existing((FLOAT,), 4, 4)
    if found is not None and b.chance(0.5) and all(e.isidentifier() for e in found.shape[1:3]):
        return found, window
    shape = (b.new_dim(high=2), b.new_dim(high=30), b.new_dim(high=30), b.new_dim(high=16))
    return b.new_input(shape), window


def make_window_partition(b: Builder, fn: str) -> Value:
    x, window = _window_source(b)
    batch, height, width, channels = x.shape
    grid = f"{batch}*{height}/{window}*{width}/{window}"
    shape = (grid, str(window), str(window), channels)
    return _materialise(b, b.emit(fn, (Ref(x.name), window), {}, shape, x.dtype, x.exact))


def make_window_unpartition(b: Builder, fn: str) -> Value:
    x, window = _window_source(b)
    batch, height, width, channels = x.shape
    grid = f"{batch}*{height}/{window}*{width}/{window}"
    windows = b.emit("window_partition", (Ref(x.name), window), {}, (grid, str(window), str(window), channels),
                     x.dtype, x.exact)
    windows = _materialise(b, windows)
    args = (Ref(windows.name), window, Dim(height), Dim(width))
    return b.emit(fn, args, {}, (batch, height, width, channels), x.dtype, windows.exact)
