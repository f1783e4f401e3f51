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
(``rests_on``); ``weft.compile`` reuses it only while each is still recorded as it was. Hashing
Weft's own source (as Triton hashes its compiler) means an edited Weft never reads
a record an older one wrote; it cannot see objects patched at run time, so a test that
patches Weft in-process compiles into a cache folder of its own. A record that cannot be
read is ignored (and rewritten);
every file is written to a temporary name and renamed, so readers see whole files.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from weft.ir import Plan
from weft.lower.nest import LoweredPlan
from weft.runtime.memory import ArenaPlan

FORMAT = 1


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
    text = repr((FORMAT, plan.name, plan.buffers, plan.kernels, plan.inputs, plan.outputs,
                 fusion, contract, lanes, use_blas, weft_source_digest(), deciding, tuple(sorted(bound))))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "records" / f"{key}.pickle"


def load_record(cache_dir: Path, key: str) -> tuple[LoweredPlan, ArenaPlan, str] | None:
    """The recorded (lowered plan, arena, C source) for ``key``, or None (absent or unreadable)."""
    found = load_record_resting(cache_dir, key)
    return None if found is None else found[:3]


def load_record_resting(cache_dir: Path, key: str) -> tuple[LoweredPlan, ArenaPlan, str, tuple] | None:
    """(lowered plan, arena, C source, what it rests on) for ``key``, or None. ``rests_on``:
    the verdicts a priced compile's regions came from (``weft.decide.record.Decision``s); the
    caller reuses the record only while each is still recorded as it was."""
    try:
        with open(_path(cache_dir, key), "rb") as stream:
            found = pickle.load(stream)
        lowered, arena, source, *rest = found
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError):
        return None
    if not isinstance(lowered, LoweredPlan) or not isinstance(arena, ArenaPlan) or not isinstance(source, str):
        return None
    rests_on = rest[0] if rest else ()
    return (lowered, arena, source, rests_on) if isinstance(rests_on, tuple) else None


def save_record(cache_dir: Path, key: str, lowered: LoweredPlan, arena: ArenaPlan, source: str,
                rests_on: tuple = ()) -> None:
    """Write the record atomically; a cache folder that cannot be written is not an error here
    (the shared object's own cache reports it)."""
    path = _path(cache_dir, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                pickle.dump((lowered, arena, source, rests_on), stream, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    except OSError:
        pass
