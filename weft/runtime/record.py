"""The compile record: what a compile decided, kept so a warm compile reuses it.

A compile of a plan chooses regions, lowers them and renders C; the shared object is
cached by its source (``weft.codegen.driver``). The record keeps the decisions that
led to that source (the lowered plan, its arena and the source itself) under a key
that covers everything they depend on::

    key = sha256(Plan.text() (name; buffers' names, shapes, dtypes, roles; members;
                 inputs, outputs), fusion, contract, lanes, BLAS on/off, the Weft source files)

so a warm compile of the same plan skips composing, lowering and rendering. A
``fusion="priced"`` compile adds the decision record's key fields (threads, machine
profile, compiler, deciding code) to the key and stores the verdicts its regions rest on
(``rests_on``); ``weft.compile`` reuses it only while each is still recorded as it was. When
the pricing budget left candidates undecided (unfused, not in the decision record), the record
says so (``undecided``: their decision keys and the budget), and a compile with the same or a smaller
budget reuses it while none of them has been recorded since: it would leave them undecided
again, and the warm plan is the cold one (a larger budget decides again, and may price them;
so does a compile after another one, a concurrent one, recorded some of them). Hashing
Weft's own source (as Triton hashes its compiler) means an edited Weft never reads
a record an older one wrote; it cannot see objects patched at run time, so a test that
patches Weft in-process compiles into a cache folder of its own. A record that cannot be
read is ignored (and rewritten);
every file is written to a temporary name and renamed, so readers see whole files.

A warm compile's cost is this key and this read. The key is per node of the plan, once
per plan object (``Plan.text`` is kept with the immutable plan; the IR's ``repr`` is
written without ``reprlib``'s recursion guard, ``weft.ir.nodes``); the read is not:
a warm compile needs of the lowering only its ``LoweringSummary`` (arena bytes, number of
calls, lanes, whether BLAS is called or weights are packed) and the C source, so the file
holds those beside the lowered plan and arena *as pickled bytes*, unpickled on first use
(``Recorded.lowering``: ``CompiledPlan.lowered``, explain, describe). A plan that is only
compiled and run never rebuilds its calls' Python objects (hundreds per layer). The
lowered part is pickled with a reducer for frozen slotted dataclasses (their field
values, rebuilt without ``dataclasses``' per-object ``__setstate__``) and refers to the
plan's own buffers and members by name instead of storing copies (the plan is at hand
whenever a record is read: it is what the key is computed from); the names it refers to
are kept beside it and checked against the plan when the file is read, so a record that
cannot be rebuilt on this plan is ignored then, not found broken later. The loaded record
is equal, field for field, to the one saved.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import operator
import pickle
from pathlib import Path

from weft.errors import CompileError
from weft.files import write_atomic
from weft.ir import Buffer, Kernel, Plan
from weft.lower.contraction_prepack import packed_buffers
from weft.lower.nest import GemmCall, LoweredPlan
from weft.lower.reuse import distinct_functions
from weft.runtime.memory import ArenaPlan

FORMAT = 4  # 4: the candidates a priced compile left undecided


@functools.lru_cache(maxsize=1)
def weft_source_digest() -> str:
    """A digest of every Python file of the installed ``weft`` package (path and content)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def record_key(plan: Plan, fusion: str, contract: str, lanes: int, use_blas: bool, deciding: str = "",
               bound: tuple[str, ...] = (), in_place: tuple[tuple[str, str], ...] = ()) -> str:
    """``deciding``: what else the decisions depend on (``fusion="priced"``: the decision
    record's key fields, threads, machine profile and compiler among them). ``bound``: the
    inputs bound at compile (``params=``: their weights may be packed at load). ``in_place``:
    the (output, input) pairs written over (their functions are rendered without ``restrict``)."""
    options = repr((FORMAT, fusion, contract, lanes, use_blas, weft_source_digest(), deciding, tuple(sorted(bound)),
                    tuple(sorted(in_place))))
    digest = hashlib.sha256(plan.text().encode())
    digest.update(b"\0" + options.encode())
    return digest.hexdigest()[:32]


# Plan.text spells a buffer by these fields and a plan by these; a new field must join the key
assert tuple(f.name for f in dataclasses.fields(Buffer)) == ("name", "shape", "dtype", "role")
assert tuple(f.name for f in dataclasses.fields(Plan) if f.init) == ("buffers", "kernels", "inputs", "outputs", "name")


def _path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "records" / f"{key}.pickle"


def _fields(cls: type) -> tuple[tuple[str, ...], bool] | None:
    """A frozen slotted dataclass's field names and whether ``cls(*values)`` rebuilds it."""
    if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen and "__slots__" in cls.__dict__):
        return None
    fields = dataclasses.fields(cls)
    return tuple(f.name for f in fields), all(f.init for f in fields)


@functools.cache
def _reduction(cls: type):
    """(rebuild function, getter of the field values) for ``cls``, or None (pickle's own way)."""
    described = _fields(cls)
    if described is None:
        return None
    names, by_init = described
    getter = operator.attrgetter(*names) if len(names) > 1 else (lambda value: (getattr(value, names[0]),))
    return (cls if by_init else _rebuild_slots), getter, by_init


def _rebuild_slots(cls: type, *values):
    made = object.__new__(cls)
    for name, value in zip(_fields(cls)[0], values, strict=True):
        object.__setattr__(made, name, value)
    return made


class _RecordPickler(pickle.Pickler):
    def __init__(self, stream, plan: Plan):
        super().__init__(stream, protocol=pickle.HIGHEST_PROTOCOL)
        self.plan = plan
        self.buffers: dict[str, None] = {}  # the plan's buffers and members referred to by name
        self.members: dict[str, None] = {}

    def persistent_id(self, value):
        if type(value) is Buffer and self.plan.index.buffers.get(value.name) == value:
            self.buffers[value.name] = None
            return ("buffer", value.name)
        if type(value) is Kernel and self.plan.index.kernels.get(value.output) == value:
            self.members[value.output] = None
            return ("member", value.output)
        return None

    def reducer_override(self, value):
        reduction = _reduction(type(value))
        if reduction is None:
            return NotImplemented
        rebuild, getter, by_init = reduction
        values = getter(value)
        return (rebuild, values) if by_init else (rebuild, (type(value), *values))


class _RecordUnpickler(pickle.Unpickler):
    def __init__(self, stream, plan: Plan):
        super().__init__(stream)
        self.plan = plan

    def persistent_load(self, reference):
        kind, name = reference
        return self.plan.index.buffers[name] if kind == "buffer" else self.plan.index.kernels[name]


@dataclasses.dataclass(frozen=True, slots=True)
class LoweringSummary:
    """What loading a compiled plan (``weft.compile.CompiledPlan``) reads of its lowering."""

    arena_bytes: int
    calls: int  # lowered functions called per run (the runner's profile slots)
    lanes: int
    blas: bool  # some call is SciPy's GEMM (its thread pool is limited per call)
    packs_weights: bool  # some call reads a packed buffer (packed into the arena at load)


def summarize(lowered: LoweredPlan, arena: ArenaPlan) -> LoweringSummary:
    return LoweringSummary(
        arena_bytes=arena.nbytes, calls=len(lowered.functions), lanes=lowered.lanes,
        blas=any(isinstance(nest, GemmCall) for function in distinct_functions(lowered.functions)
                 for nest in function.nests),
        packs_weights=bool(packed_buffers(lowered)))


class Recorded:
    """A compile record read back: the C source, the lowering's summary and the verdicts it
    rests on now; the lowered plan and arena (``lowering()``) unpickled on first use."""

    __slots__ = ("source", "summary", "rests_on", "undecided", "path", "_body", "_plan", "_lowering")

    def __init__(self, source: str, summary: LoweringSummary, rests_on: tuple, undecided: tuple | None,
                 body: bytes, plan: Plan, path: Path) -> None:
        self.source, self.summary, self.rests_on, self.path = source, summary, rests_on, path
        self.undecided = undecided  # None, or (the decision keys left undecided, the budget's seconds)
        self._body, self._plan, self._lowering = body, plan, None

    def lowering(self) -> tuple[LoweredPlan, ArenaPlan]:
        """(lowered plan, arena), unpickled the first time (``CompileError`` if they cannot be:
        the file was read whole and its names checked, so only damaged bytes get here)."""
        if self._lowering is None:
            try:
                lowered, arena = _RecordUnpickler(io.BytesIO(self._body), self._plan).load()
            except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, KeyError) as problem:
                raise CompileError(f"the compile record {self.path} of plan {self._plan.name} cannot be read"
                                   f" ({type(problem).__name__}: {problem}); delete it and compile again") from problem
            if not isinstance(lowered, LoweredPlan) or not isinstance(arena, ArenaPlan):
                raise CompileError(f"the compile record {self.path} of plan {self._plan.name} holds no lowered"
                                   " plan; delete it and compile again")
            self._lowering = (lowered, arena)  # (the bytes are kept: a second thread may be reading them)
        return self._lowering


def load_record(cache_dir: Path, key: str, plan: Plan) -> Recorded | None:
    """The record for ``key`` (computed from ``plan``), or None (absent, unreadable, or naming
    a buffer or member ``plan`` does not have). ``rests_on``: the verdicts a priced compile's
    regions came from (``weft.decide.record.Decision``s); the caller reuses the record only
    while each is still recorded as it was."""
    path = _path(cache_dir, key)
    try:
        with open(path, "rb") as stream:
            found = _RecordUnpickler(io.BytesIO(stream.read()), plan).load()
        version, source, summary, rests_on, undecided, (buffers, members), body = found
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError, KeyError):
        return None
    if (version != FORMAT or not isinstance(source, str) or not isinstance(summary, LoweringSummary)
            or not isinstance(rests_on, tuple) or not isinstance(body, bytes)
            or not (undecided is None or isinstance(undecided, tuple))):
        return None
    index = plan.index  # built once per plan (loading the compiled plan reads it too)
    if not index.buffers.keys() >= set(buffers) or not index.kernels.keys() >= set(members):
        return None
    return Recorded(source, summary, rests_on, undecided, body, plan, path)


def save_record(cache_dir: Path, key: str, plan: Plan, lowered: LoweredPlan, arena: ArenaPlan, source: str,
                rests_on: tuple = (), undecided: tuple | None = None) -> None:
    """Write the record atomically; a cache folder that cannot be written is not an error here
    (the shared object's own cache reports it)."""
    path = _path(cache_dir, key)
    body = io.BytesIO()
    pickler = _RecordPickler(body, plan)
    pickler.dump((lowered, arena))
    stream = io.BytesIO()
    _RecordPickler(stream, plan).dump((FORMAT, source, summarize(lowered, arena), rests_on, undecided,
                                       (tuple(pickler.buffers), tuple(pickler.members)), body.getvalue()))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, stream.getvalue())
    except OSError:
        pass
