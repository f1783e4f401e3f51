"""The compile record: what a compile decided, kept so a warm compile reuses it.

A compile of a plan chooses regions, lowers them and renders C; the shared object is
cached by its source (``weft.codegen.driver``). The record keeps the decisions that
led to that source (the lowered plan, its arena and the source itself) under a key
that covers everything they depend on::

    key = sha256(plan (names, shapes, bodies, inputs, outputs), fusion, contract, lanes,
                 BLAS on/off, the Weft source files themselves)

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

A warm compile's cost is this key and this read, both per node of the plan, so both
are kept lean: the IR's ``repr`` skips ``reprlib``'s recursion guard
(``weft.ir.nodes``), and the record is pickled with a reducer for frozen slotted
dataclasses (their field values, rebuilt without ``dataclasses``' per-object
``__setstate__``) and refers to the plan's own buffers and members by name instead of
storing copies (the plan is at hand whenever a record is read: it is what the key is
computed from). The loaded record is equal, field for field, to the one saved.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import operator
import pickle
from pathlib import Path

from weft.files import write_atomic
from weft.ir import Buffer, Kernel, Plan
from weft.lower.nest import LoweredPlan
from weft.runtime.memory import ArenaPlan

FORMAT = 3  # 3: the candidates a priced compile left undecided


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
               bound: tuple[str, ...] = ()) -> str:
    """``deciding``: what else the decisions depend on (``fusion="priced"``: the decision
    record's key fields, threads, machine profile and compiler among them). ``bound``: the
    inputs bound at compile (``params=``: their weights may be packed at load)."""
    # enum members' ``_value_`` is their value (``.value`` is a descriptor call per access)
    buffers = [(buffer.name, buffer.shape, buffer.dtype._value_, buffer.role._value_) for buffer in plan.buffers]
    text = repr((FORMAT, plan.name, buffers, plan.kernels, plan.inputs, plan.outputs,
                 fusion, contract, lanes, use_blas, weft_source_digest(), deciding, tuple(sorted(bound))))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# record_key spells a buffer by these fields; a new field must join the key
assert tuple(f.name for f in dataclasses.fields(Buffer)) == ("name", "shape", "dtype", "role")


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

    def persistent_id(self, value):
        if type(value) is Buffer and self.plan.index.buffers.get(value.name) == value:
            return ("buffer", value.name)
        if type(value) is Kernel and self.plan.index.kernels.get(value.output) == value:
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


def load_record(cache_dir: Path, key: str, plan: Plan) -> tuple[LoweredPlan, ArenaPlan, str] | None:
    """The recorded (lowered plan, arena, C source) for ``key`` (computed from ``plan``),
    or None (absent or unreadable)."""
    found = load_record_resting(cache_dir, key, plan)
    return None if found is None else found[:3]


def load_record_resting(cache_dir: Path, key: str, plan: Plan) -> tuple[LoweredPlan, ArenaPlan, str, tuple,
                                                                       tuple | None] | None:
    """(lowered plan, arena, C source, what it rests on, undecided) for ``key``, or None.
    ``rests_on``: the verdicts a priced compile's regions came from
    (``weft.decide.record.Decision``s); the caller reuses the record only while each is still
    recorded as it was. ``undecided``: None, or (the decision keys left undecided, the budget's seconds)."""
    try:
        with open(_path(cache_dir, key), "rb") as stream:
            lowered, arena, source, rests_on, undecided = _RecordUnpickler(io.BytesIO(stream.read()), plan).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError, KeyError):
        return None
    if not isinstance(lowered, LoweredPlan) or not isinstance(arena, ArenaPlan) or not isinstance(source, str):
        return None
    if not isinstance(rests_on, tuple) or not (undecided is None or isinstance(undecided, tuple)):
        return None
    return lowered, arena, source, rests_on, undecided


def save_record(cache_dir: Path, key: str, plan: Plan, lowered: LoweredPlan, arena: ArenaPlan, source: str,
                rests_on: tuple = (), undecided: tuple | None = None) -> None:
    """Write the record atomically; a cache folder that cannot be written is not an error here
    (the shared object's own cache reports it)."""
    path = _path(cache_dir, key)
    stream = io.BytesIO()
    _RecordPickler(stream, plan).dump((lowered, arena, source, rests_on, undecided))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, stream.getvalue())
    except OSError:
        pass
