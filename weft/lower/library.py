"""Library bodies as lowered data: a region a matcher proved legal for a hand-written body
(``weft.decide.library``) becomes one ``LibraryCall``; ``weft.codegen.library`` renders its C.

The lowering is given the matcher's proof as plain data (``match``: ``body``, ``roles``,
``constants``, ``shape``, ``outputs``) by the seam that calls both (``weft.fuse``,
``weft.compile``); it imports nothing from ``weft.decide``. Before/after, for one Adam step::

    region [adam_m adam_v adam_param]  +  match(body="fused adam", roles=(param: p, grad: g, ...))
    LoweredFunction(members=(adam_m, adam_v, adam_param),
                    nests=(LibraryCall("fused adam", views=(param: view of p, ...), elements=N),))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from weft.ir import Axis, DType, Fold, Kernel, Plan
from weft.lower.nest import BufferView, LoweredFunction
from weft.lower.values import Product, Var

CE_CHUNK_POINTER = "wf_chunk"
CE_ROW_VARIABLE = "wf_r0"
CE_COLUMN_VARIABLE = "wf_j0"

LIBRARY_CHUNK = 16384
"""Elements per work item of an elementwise body (64 KiB per stream: several work items per
core at any size worth threading, each streaming through L1/L2)."""

STREAMING_MIN_BYTES = 4 * 1024 * 1024
"""Output buffers at least this large are written with streaming (non-temporal) stores: they
cannot stay in cache for a reader anyway, and a streamed line skips its read for ownership."""

LIBRARY_BODIES = ("fused adam", "chunked cross-entropy", "welford layer norm")
"""The bodies this lowering (and ``weft.codegen.library``) can emit."""


@dataclass(frozen=True, slots=True)
class LibraryCall:
    """A hand-written body over whole buffers: ``views`` per role, the constants the matcher
    recovered, ``elements`` per buffer, ``chunk`` elements per (parallel) work item."""

    body: str
    kernel: Kernel  # the last member it writes (the function's anchor)
    views: tuple[tuple[str, BufferView], ...]  # (role, view)
    constants: tuple[tuple[str, float], ...]
    elements: int
    chunk: int
    parallel: bool
    streaming: bool = False  # outputs written past the caches (non-temporal stores)
    # chunked cross-entropy: (rows, columns, nest) per shape of a chunk of logits (full, last rows,
    # last columns, both); nest is the packed contraction microkernel writing the chunk, or None
    # (too small for it: plain dot products)
    chunk_nests: tuple[tuple[int, int, object], ...] = ()
    scratch_bytes: int = 0  # per work item (per thread), beyond the arena

    @property
    def row_block(self) -> int:
        return int(self.constant("row_block"))

    @property
    def vocab_chunk(self) -> int:
        return int(self.constant("vocab_chunk"))

    @property
    def name(self) -> str:
        return self.kernel.output

    def view(self, role: str) -> BufferView:
        return dict(self.views)[role]

    def constant(self, name: str) -> float:
        return dict(self.constants)[name]

    def describe(self) -> str:
        if self.chunk_nests:
            kinds = ", ".join(f"{r}x{c} {'microkernel' if nest is not None else 'dot products'}"
                              for r, c, nest in self.chunk_nests)
            return (f"{self.kernel.output}: library body {self.body}: blocks of {self.row_block} rows, vocabulary"
                    f" chunks of {self.vocab_chunk} ({kinds}); {self.scratch_bytes:,} B scratch per work item;"
                    f" {'parallel' if self.parallel else 'serial'}")
        items = -(-self.elements // self.chunk)
        return (f"{self.kernel.output}: library body {self.body} over {self.elements:,} elements,"
                f" {items} work items of {self.chunk}; {'parallel' if self.parallel else 'serial'}"
                + ("; streaming stores" if self.streaming else ""))


def library_function_name(anchor: str, body: str, taken: set[str]) -> str:
    from weft.lower.schedule import storage_name

    return "l" + storage_name(f"{body.replace(' ', '_')}_{anchor}"[:48], taken)[1:]


def lower_library(plan: Plan, members: tuple[str, ...], match, views: dict[str, BufferView],
                  taken: set[str], lanes: int = 16, private: tuple[str, ...] = ()) -> LoweredFunction | None:
    """One function running ``match.body`` for ``members``; None for a body this lowering
    does not know (the caller then lowers the region its usual way). ``private``: members
    whose output the body keeps to itself (no arena space)."""
    if match.body not in LIBRARY_BODIES or set(match.outputs) != set(members):
        return None
    if match.body == "chunked cross-entropy":
        call = _cross_entropy_call(plan, members, match, views, lanes)
        if call is None:
            return None
        return _library_function(members, match.body, taken, call, tuple(view for _, view in call.views), private)
    elements = math.prod(match.shape)
    if match.body == "welford layer norm":  # one row per step of the work-item loop
        if any(views[buffer].offsets != (0,) * len(views[buffer].offsets) for _, buffer in match.roles):
            return None
        rows = match.shape[0]
        call = LibraryCall(body=match.body, kernel=plan.kernel(members[-1]),
                           views=tuple((role, views[buffer]) for role, buffer in match.roles),
                           constants=tuple(match.constants), elements=elements, chunk=1,
                           parallel=rows > 1 and elements >= 2 * LIBRARY_CHUNK)
        params = dict.fromkeys(view for _, view in call.views)
        return _library_function(members, match.body, taken, call, tuple(params), private)
    call = LibraryCall(
        body=match.body,
        kernel=plan.kernel(members[-1]),
        views=tuple((role, views[buffer]) for role, buffer in match.roles),
        constants=tuple(match.constants),
        elements=elements,
        chunk=LIBRARY_CHUNK,
        parallel=elements >= 2 * LIBRARY_CHUNK,
        streaming=elements * 4 >= STREAMING_MIN_BYTES,
    )
    params: dict[str, BufferView] = {}
    for _, view in call.views:
        params.setdefault(view.buffer, view)
    return _library_function(members, match.body, taken, call, tuple(params.values()), private)


def _library_function(members: tuple[str, ...], body: str, taken: set[str], call,
                      params: tuple[BufferView, ...], private: tuple[str, ...]) -> LoweredFunction:
    """The function around one library call. A member the body writes through a view has
    storage, even when no later function reads it: fused Adam writes m' and v' whether or not
    the plan returns them, so only the members without a view stay private (no arena space)."""
    written = {view.buffer for view in params}
    return LoweredFunction(name=library_function_name(members[-1], body, taken), members=members,
                           nests=(call,), params=params,
                           private=tuple(name for name in private if name not in written))


def _chunk_nest(logits: Kernel, rows: int, columns: int, views: dict[str, BufferView], lanes: int):
    """The packed contraction microkernel for one (rows x columns) chunk of the logits, written
    to the chunk scratch: the projection's own body over shifted views of h and W (row block
    ``wf_r0``, vocabulary chunk ``wf_j0``), serial (the work items are the parallel loop)."""
    from weft.lower.contraction import lower_contraction

    row_axis, column_axis = (axis.name for axis in logits.axes)
    hidden, weight = (load.buffer for load in (logits.body.left, logits.body.right))
    chunk = Kernel(logits.output, (Axis(row_axis, rows), Axis(column_axis, columns)), logits.body,
                   Fold(logits.fold.axes, logits.fold.combiner))
    shifted = {
        hidden: replace_offsets(views[hidden], (Product(Var(CE_ROW_VARIABLE), -1), 0)),
        weight: replace_offsets(views[weight], (Product(Var(CE_COLUMN_VARIABLE), -1), 0)),
        logits.output: BufferView(logits.output, CE_CHUNK_POINTER, DType.FLOAT32, (rows, columns), (columns, 1),
                                  (0, 0)),
    }
    return lower_contraction(chunk, shifted, lanes, "inference", 1 << 62)


def replace_offsets(view: BufferView, offsets: tuple) -> BufferView:
    import dataclasses

    return dataclasses.replace(view, offsets=offsets)


def _cross_entropy_call(plan: Plan, members: tuple[str, ...], match, views: dict[str, BufferView],
                        lanes: int = 16) -> LibraryCall | None:
    logits = plan.kernel(members[0])
    rows, classes = match.shape
    row_block, vocab_chunk = int(match.constant("row_block")), int(match.constant("vocab_chunk"))
    if any(views[match.role(role)].offsets != (0,) * len(views[match.role(role)].offsets)
           for role in ("hidden", "weight", "targets", "loss")):
        return None
    shapes = {(row_block, vocab_chunk), (row_block, classes % vocab_chunk or vocab_chunk),
              (rows % row_block or row_block, vocab_chunk),
              (rows % row_block or row_block, classes % vocab_chunk or vocab_chunk)}
    chunk_nests = tuple((r, c, _chunk_nest(logits, r, c, views, lanes)) for r, c in sorted(shapes))
    packing = 0
    for _, _, nest in chunk_nests:
        if nest is not None:
            b = nest.blocking
            packing = max(packing, nest.fold_points * b.nc * 4 + (b.kc * b.mc * 4 if nest.pack_x else 0))
    scratch = row_block * vocab_chunk * 4 + 3 * row_block * 4 + packing
    blocks = -(-rows // row_block)
    return LibraryCall(
        body=match.body,
        kernel=plan.kernel(members[-1]),
        views=tuple((role, views[buffer]) for role, buffer in match.roles),
        constants=tuple(match.constants),
        elements=rows * classes,
        chunk=row_block,
        parallel=blocks > 1,
        chunk_nests=chunk_nests,
        scratch_bytes=scratch,
    )
