"""The compiler driver and the on-disk artifact cache.

``build(source, config)`` returns the path of a shared object for a C source.
The cache key hashes the source, the compiler (path and version), the flags, the
CPU (model and every feature flag) and Weft's version. An entry is three files in the cache folder::

    <key>.c                  the source (kept for CompileError reports and reading)
    <key>-<digest>.so        the shared object, named by its own content digest
    <key>.entry              JSON: which .so, its sha256 and size

Every file is written to a temporary name and renamed (``os.replace``), so a
reader sees a whole file or none; two processes building the same key at once
both succeed and the last rename wins. An entry whose .so is missing, truncated
or altered fails its digest check: it is reported (``CacheWarning``), deleted,
rebuilt, and never loaded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from weft.codegen.cpu import cpu_signature
from weft.errors import CompileError, ConfigError
from weft.files import write_atomic
from weft.version import __version__

COMMON_FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fwrapv", "-fopenmp", "-fPIC", "-shared")
CONTRACT_FLAGS = {
    # Strict: IEEE float32 exactly as written; no contraction into FMA, no fast-math.
    "strict": ("-fno-fast-math", "-ffp-contract=off"),
    # Inference: FMA contraction allowed. Fold reassociation is explicit in the generated
    # code (several accumulators, fold-axis lanes); -fassociative-math is NOT used because
    # it folds away the rounding tricks inside Weft's math (x + 0x1.8p23f - 0x1.8p23f).
    # NaN/inf still honoured (no -ffinite-math-only).
    "inference": ("-ffp-contract=fast",),
}

INSTALL_HINT = (
    "install a C compiler with OpenMP (Debian/Ubuntu: apt-get install gcc; Fedora: dnf install gcc;"
    " macOS: brew install gcc libomp) or point WEFT_CC at one"
)


class CacheWarning(UserWarning):
    """A cache entry was corrupted and has been rebuilt."""


@dataclass(frozen=True, slots=True)
class Compiler:
    command: str
    path: str
    version: str


@dataclass(frozen=True, slots=True)
class Artifact:
    so_path: Path
    source_path: Path
    key: str
    compiled: bool
    command: tuple[str, ...]
    compiler: Compiler
    flags: tuple[str, ...]


def flags_for(contract: str) -> tuple[str, ...]:
    return COMMON_FLAGS[:1] + CONTRACT_FLAGS[contract] + COMMON_FLAGS[1:]


@functools.lru_cache(maxsize=8)
def find_compiler(command: str) -> Compiler:
    """The compiler's resolved path and version line; CompileError if it cannot run."""
    path = shutil.which(command)
    if path is None:
        raise CompileError(
            f"C compiler {command!r} not found on PATH; {INSTALL_HINT}", command=(command,), stderr=""
        )
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as error:
        raise CompileError(f"C compiler {path!r} cannot run ({error}); {INSTALL_HINT}", command=(path,)) from None
    version = (result.stdout or result.stderr).strip().splitlines()
    return Compiler(command=command, path=path, version=version[0] if version else "unknown")


def cache_key(source: str, compiler: Compiler, flags: tuple[str, ...], cpu: str) -> str:
    digest = hashlib.sha256()
    for part in (source, compiler.path, compiler.version, " ".join(flags), cpu, __version__):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lookup(folder: Path, key: str) -> Path | None:
    """The cached .so for ``key`` if its entry is whole and its digest matches, else None."""
    entry_path = folder / f"{key}.entry"
    if not entry_path.exists():
        return None
    problem = None
    try:
        entry = json.loads(entry_path.read_text())
        so_path = folder / entry["so"]
        if not so_path.exists():
            problem = f"{so_path.name} is missing"
        elif so_path.stat().st_size != entry["size"] or _file_digest(so_path) != entry["sha256"]:
            problem = f"{so_path.name} is truncated or altered (digest mismatch)"
    except (OSError, ValueError, KeyError, TypeError) as error:
        problem = f"{entry_path.name} is unreadable ({error})"
        so_path = None
    if problem is None:
        return so_path
    warnings.warn(f"weft cache entry {key} in {folder} is corrupted: {problem}; rebuilding it", CacheWarning,
                  stacklevel=3)
    for path in (entry_path, so_path):
        try:
            if path is not None:
                path.unlink()
        except OSError:
            pass
    return None


def compile_source(compiler: Compiler, flags: tuple[str, ...], source_path: Path, so_path: Path) -> tuple[str, ...]:
    command = (compiler.path, *flags, "-o", str(so_path), str(source_path), "-lm")
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except OSError as error:
        raise CompileError(f"C compiler {compiler.path!r} cannot run ({error}); {INSTALL_HINT}",
                           command=command, stderr=str(error), source_path=str(source_path)) from None
    if result.returncode != 0:
        stderr = result.stderr
        if "omp.h" in stderr or "fopenmp" in stderr or "-lgomp" in stderr or "-lomp" in stderr:
            fix = "the compiler lacks OpenMP: install libgomp (gcc) or libomp (clang), or set WEFT_CC=gcc"
        else:
            fix = f"this is a Weft code-generation bug; please report it with {source_path}"
        tail = "\n".join(stderr.strip().splitlines()[-20:])
        raise CompileError(
            f"C compilation failed (exit {result.returncode}): {' '.join(command)}\n{tail}\nfix: {fix}",
            command=command, stderr=stderr, source_path=str(source_path),
        )
    return command


def build(source: str, cc: str, cache_dir: Path, contract: str) -> Artifact:
    """A shared object for ``source``: from the cache, or compiled and stored atomically."""
    compiler = find_compiler(cc)
    flags = flags_for(contract)
    key = cache_key(source, compiler, flags, cpu_signature())
    folder = Path(cache_dir) / "objects"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ConfigError(
            f"the Weft cache folder {folder} is not writable ({error}); set WEFT_CACHE_DIR to a writable folder"
        ) from None
    source_path = folder / f"{key}.c"
    cached = lookup(folder, key)
    if cached is not None:
        if not source_path.exists():
            write_atomic(source_path, source)
        return Artifact(cached, source_path, key, False, (), compiler, flags)
    write_atomic(source_path, source)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f"{key}.", suffix=".tmp.so")
    os.close(handle)
    try:
        command = compile_source(compiler, flags, source_path, Path(temporary))
        data = Path(temporary).read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        so_path = folder / f"{key}-{digest[:16]}.so"
        os.replace(temporary, so_path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    entry = {"so": so_path.name, "sha256": digest, "size": len(data), "compiler": compiler.version,
             "flags": list(flags)}
    write_atomic(folder / f"{key}.entry", json.dumps(entry))
    return Artifact(so_path, source_path, key, True, command, compiler, flags)
