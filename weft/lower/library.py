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

from weft.ir import Kernel, Plan
from weft.lower.nest import BufferView, LoweredFunction

LIBRARY_CHUNK = 16384
"""Elements per work item of an elementwise body (64 KiB per stream: several work items per
core at any size worth threading, each streaming through L1/L2)."""

STREAMING_MIN_BYTES = 4 * 1024 * 1024
"""Output buffers at least this large are written with streaming (non-temporal) stores: they
cannot stay in cache for a reader anyway, and a streamed line skips its read for ownership."""

LIBRARY_BODIES = ("fused adam",)
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

    @property
    def name(self) -> str:
        return self.kernel.output

    def view(self, role: str) -> BufferView:
        return dict(self.views)[role]

    def constant(self, name: str) -> float:
        return dict(self.constants)[name]

    def describe(self) -> str:
        items = -(-self.elements // self.chunk)
        return (f"{self.kernel.output}: library body {self.body} over {self.elements:,} elements,"
                f" {items} work items of {self.chunk}; {'parallel' if self.parallel else 'serial'}"
                + ("; streaming stores" if self.streaming else ""))


def library_function_name(anchor: str, body: str, taken: set[str]) -> str:
    from weft.lower.schedule import storage_name

    return "l" + storage_name(f"{body.replace(' ', '_')}_{anchor}"[:48], taken)[1:]


def lower_library(plan: Plan, members: tuple[str, ...], match, views: dict[str, BufferView],
                  taken: set[str]) -> LoweredFunction | None:
    """One function running ``match.body`` for ``members``; None for a body this lowering
    does not know (the caller then lowers the region its usual way)."""
    if match.body not in LIBRARY_BODIES or set(match.outputs) != set(members):
        return None
    elements = math.prod(match.shape)
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
    return LoweredFunction(name=library_function_name(members[-1], match.body, taken), members=members,
                           nests=(call,), params=tuple(params.values()))
