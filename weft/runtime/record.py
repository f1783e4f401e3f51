"""The compile record: what a compile decided, kept so a warm compile reuses it.

A compile of a plan chooses regions, lowers them and renders C; the shared object is
cached by its source (``weft.codegen.driver``). The record keeps the decisions that
led to that source (the lowered plan, its arena and the source itself) under a key
that covers everything they depend on::

    key = sha256(plan (names, shapes, bodies, inputs, outputs), fusion, contract, lanes,
                 BLAS on/off, the Weft source files themselves)

so a warm compile of the same plan skips composing, lowering and rendering. Hashing
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


def record_key(plan: Plan, fusion: str, contract: str, lanes: int, use_blas: bool,
               bound: tuple[str, ...] = ()) -> str:
    """``bound``: the inputs bound at compile (their weights may be packed at bind)."""
    text = repr((FORMAT, plan.name, plan.buffers, plan.kernels, plan.inputs, plan.outputs,
                 fusion, contract, lanes, use_blas, weft_source_digest(), tuple(sorted(bound))))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "records" / f"{key}.pickle"


def load_record(cache_dir: Path, key: str) -> tuple[LoweredPlan, ArenaPlan, str] | None:
    """The recorded (lowered plan, arena, C source) for ``key``, or None (absent or unreadable)."""
    try:
        with open(_path(cache_dir, key), "rb") as stream:
            lowered, arena, source = pickle.load(stream)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError):
        return None
    if not isinstance(lowered, LoweredPlan) or not isinstance(arena, ArenaPlan) or not isinstance(source, str):
        return None
    return lowered, arena, source


def save_record(cache_dir: Path, key: str, lowered: LoweredPlan, arena: ArenaPlan, source: str) -> None:
    """Write the record atomically; a cache folder that cannot be written is not an error here
    (the shared object's own cache reports it)."""
    path = _path(cache_dir, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                pickle.dump((lowered, arena, source), stream, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    except OSError:
        pass
