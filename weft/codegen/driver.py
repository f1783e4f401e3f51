"""The compiler driver and the on-disk artifact cache.

``build(source, config)`` returns the path of a shared object for a C source. A source
marked for cutting (``weft.codegen.units``) is compiled as several translation units at
once, one compiler per CPU, then linked (``compile_source``); any other in one run.
The cache key hashes the source, the compiler (path and version), the flags, the
CPU (model and every feature flag), Weft's version and the cache format. An entry is
three files in the cache folder::

    <key>.c                  the source (kept for CompileError reports and reading)
    <key>-<digest>.so        the shared object, named by its own content digest
    <key>.entry              JSON: which .so, its sha256 and size, the source's sha256

Every file is written to a temporary name and renamed (``os.replace``), so a
reader sees a whole file or none; two processes building the same key at once
both succeed and the last rename wins. Files get the permissions a normal file
would (``0666`` or ``0777`` less the umask), so a group sharing the cache folder can
read them. A freshly built object must load (``dlopen``) before it is stored: a
compiler that exits 0 without writing a loadable object raises ``CompileError``
and caches nothing. An entry whose .so or .c is missing, truncated or altered fails
its digest check, and one whose object does not load is as bad: it is reported
(``CacheWarning``), deleted, rebuilt, and never used.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from weft.codegen.cpu import cpu_signature
from weft.codegen.pch import BUILD_TIMEOUT_S, header_flags
from weft.codegen.units import translation_units
from weft.errors import CompileError, ConfigError
from weft.files import normal_permissions, write_atomic
from weft.version import __version__

# -fno-unswitch-loops: GCC 12.2 (Debian 12.2.0-14) miscompiles a vectorised scalar tail after
# unswitching (avg_pool2d's tap count at a corner counted an out-of-range tap: 5 for 4, found
# by the fuzzer; right at -O2, with -fno-tree-loop-vectorize or -fno-unswitch-loops). The
# generated code already versions its loops itself (full block / tail), so nothing is lost.
COMMON_FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fwrapv", "-fno-unswitch-loops", "-fopenmp", "-fPIC",
                "-shared")
CONTRACT_FLAGS = {
    # Strict: IEEE float32 exactly as written; no contraction into FMA, no fast-math.
    "strict": ("-fno-fast-math", "-ffp-contract=off"),
    # Inference: FMA contraction allowed. Fold reassociation is explicit in the generated
    # code (several accumulators, fold-axis lanes); -fassociative-math is NOT used because
    # it folds away the rounding tricks inside Weft's math (x + 0x1.8p23f - 0x1.8p23f).
    # NaN/inf still honoured (no -ffinite-math-only).
    "inference": ("-ffp-contract=fast",),
}

CACHE_FORMAT = "2"  # entries carry the source's digest; older entries are never looked up

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
    for part in (source, compiler.path, compiler.version, " ".join(flags), cpu, __version__, CACHE_FORMAT):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_problem(so_path: Path) -> str | None:
    """Why the shared object cannot be loaded (``dlopen``), or None when it loads."""
    try:
        ctypes.CDLL(str(so_path))
    except OSError as error:
        return str(error)
    return None


def _openmp_runtime_missing(problem: str) -> bool:
    return "libgomp" in problem or "libomp" in problem or "libiomp" in problem


def lookup(folder: Path, key: str) -> Path | None:
    """The cached .so for ``key`` if its entry is whole, the digests of its .so and .c
    match and the .so loads; else None (a damaged entry is reported and deleted)."""
    entry_path = folder / f"{key}.entry"
    source_path = folder / f"{key}.c"
    if not entry_path.exists():
        return None
    problem = None
    so_path = None
    try:
        entry = json.loads(entry_path.read_text())
        so_path = folder / entry["so"]
        if not so_path.exists():
            problem = f"{so_path.name} is missing"
        elif so_path.stat().st_size != entry["size"] or _file_digest(so_path) != entry["sha256"]:
            problem = f"{so_path.name} is truncated or altered (digest mismatch)"
        elif not source_path.exists():
            problem = f"{source_path.name} is missing"
        elif _file_digest(source_path) != entry["source_sha256"]:
            problem = f"{source_path.name} is truncated or altered (digest mismatch)"
        else:
            failure = load_problem(so_path)
            if failure is not None:
                problem = f"{so_path.name} does not load ({failure})"
    except (OSError, ValueError, KeyError, TypeError) as error:
        problem = f"{entry_path.name} is unreadable ({error})"
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


def compile_source(compiler: Compiler, flags: tuple[str, ...], source_path: Path, so_path: Path,
                   timeout_s: float = 600, units: list[str] | None = None) -> tuple[str, ...]:
    """Run the compiler on ``source_path`` to the shared object ``so_path``, or, given
    several ``units`` (``weft.codegen.units``: the same source cut in translation units),
    one compiler per unit at once, then one link; past ``timeout_s`` every compiler still
    running is killed and ``subprocess.TimeoutExpired`` raised. Returns the command (the
    link command for units)."""
    if units is None or len(units) < 2:
        command = (compiler.path, *flags, "-o", str(so_path), str(source_path), "-lm")
        _run_all([command], timeout_s, compiler, source_path)
        return command
    compile_flags = tuple(flag for flag in flags if flag != "-shared") + ("-c",)
    with tempfile.TemporaryDirectory(dir=so_path.parent, prefix=f".{so_path.name}.units.") as work:
        objects, commands = [], []
        for number, unit in enumerate(units):
            unit_path, object_path = Path(work) / f"unit{number}.c", Path(work) / f"unit{number}.o"
            unit_path.write_text(unit)
            objects.append(str(object_path))
            commands.append((compiler.path, *compile_flags, "-o", str(object_path), str(unit_path)))
        deadline = time.monotonic() + timeout_s
        _run_all(commands, timeout_s, compiler, source_path)
        link = (compiler.path, *flags, "-o", str(so_path), *objects, "-lm")
        _run_all([link], max(0.0, deadline - time.monotonic()), compiler, source_path)
    return link


def _run_all(commands: list[tuple[str, ...]], timeout_s: float, compiler: Compiler, source_path: Path) -> None:
    """Start every command at once and wait for all; the first failure (in the commands'
    order) raises ``CompileError``; past ``timeout_s`` all still running are killed."""
    running = []
    try:
        for command in commands:
            try:
                running.append((command, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                          text=True)))
            except OSError as error:
                raise CompileError(f"C compiler {compiler.path!r} cannot run ({error}); {INSTALL_HINT}",
                                   command=command, stderr=str(error), source_path=str(source_path)) from None
        deadline = time.monotonic() + timeout_s
        results = []
        for command, process in running:
            try:
                _, stderr = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise subprocess.TimeoutExpired(command, timeout_s) from None
            results.append((command, process.returncode, stderr))
    finally:
        for _, process in running:
            if process.poll() is None:
                process.kill()
                process.wait()
    for command, returncode, stderr in results:
        if returncode != 0:
            _raise_failed(command, returncode, stderr, source_path)


def _raise_failed(command: tuple[str, ...], returncode: int, stderr: str, source_path: Path) -> None:
    if "omp.h" in stderr or "fopenmp" in stderr or "-lgomp" in stderr or "-lomp" in stderr:
        fix = "the compiler lacks OpenMP: install libgomp (gcc) or libomp (clang), or set WEFT_CC=gcc"
    else:
        fix = f"this is a Weft code-generation bug; please report it with {source_path}"
    tail = "\n".join(stderr.strip().splitlines()[-20:])
    raise CompileError(
        f"C compilation failed (exit {returncode}): {' '.join(command)}\n{tail}\nfix: {fix}",
        command=command, stderr=stderr, source_path=str(source_path),
    )


def cpu_count() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def compile_jobs(samples: int = 5, interval_s: float = 0.002) -> int:
    """How many compilers to run at once now: the CPUs this process may use, plus the one it
    frees while it waits for them, less the tasks others are running (the median of a few
    readings of the runnable count in ``/proc/loadavg``, this process excluded; niced ones
    count). Measured on 2 CPUs (sam3-encoder, 620 kB of C, benchmarks/compile_units.py): with
    one other task running, 2 units took 0.70 of one unit's time; at load 4, 1.15. At least
    1, at most the CPUs; the CPUs where the count cannot be read."""
    cpus = cpu_count()
    readings = []
    try:
        for number in range(samples):
            if number:
                time.sleep(interval_s)
            with open("/proc/loadavg") as stream:
                readings.append(int(stream.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return cpus
    return max(1, min(cpus, cpus + 1 - int(statistics.median(readings))))


def build(source: str, cc: str, cache_dir: Path, contract: str, timeout_s: float = 600,
          jobs: int | None = None) -> Artifact:
    """A shared object for ``source``: from the cache, or compiled and stored atomically.
    A source marked for cutting (``weft.codegen.units``) is compiled as up to ``jobs``
    translation units at once (None: as many as CPUs are free, ``compile_jobs()``), then linked; the key is the
    source's, not the cut's (the cut changes no function's C, only which file holds it).
    A compiler still running after ``timeout_s`` is killed (``subprocess.TimeoutExpired``:
    a timed race gives up rather than overrun its share); nothing is cached then."""
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
        return Artifact(cached, source_path, key, False, (), compiler, flags)
    source_bytes = source.encode()
    write_atomic(source_path, source_bytes)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f"{key}.", suffix=".tmp.so")
    os.close(handle)
    try:
        units = translation_units(source, cpu_count() if jobs is None else jobs, str(source_path))
        if jobs is None and len(units) > 1:  # a source worth cutting: as many units as CPUs are free now
            free = compile_jobs()
            if free < len(units):
                units = translation_units(source, free, str(source_path))
        headers = header_flags(compiler, flags, Path(cache_dir), cpu_signature(), may_build=timeout_s >= BUILD_TIMEOUT_S)
        try:
            command = compile_source(compiler, flags + headers, source_path, Path(temporary), timeout_s, units)
        except CompileError as error:
            if not headers or "precompiled header" not in (error.stderr or ""):
                raise
            # a damaged .gch (GCC ignores a foreign one but fails on a truncated one): drop it, compile without
            warnings.warn(f"weft cache: the precompiled header in {headers[1]} is damaged ({error.stderr.strip()[:200]});"
                          " removing it (the next untimed build rebuilds it)", CacheWarning, stacklevel=2)
            shutil.rmtree(headers[1], ignore_errors=True)
            command = compile_source(compiler, flags, source_path, Path(temporary), timeout_s, units)
        _check_loadable(Path(temporary), command, source_path)
        normal_permissions(temporary, executable=True)
        data = Path(temporary).read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        so_path = folder / f"{key}-{digest[:16]}.so"
        os.replace(temporary, so_path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    entry = {"so": so_path.name, "sha256": digest, "size": len(data),
             "source_sha256": hashlib.sha256(source_bytes).hexdigest(), "compiler": compiler.version,
             "flags": list(flags)}
    write_atomic(folder / f"{key}.entry", json.dumps(entry))
    return Artifact(so_path, source_path, key, True, command, compiler, flags)


def prepare_headers(cc: str, cache_dir: Path) -> None:
    """Build the precompiled headers (``weft.codegen.pch``) of every contract for ``cc`` in
    ``cache_dir`` now, so that no compile pays for them (the compile-time benchmark)."""
    compiler = find_compiler(cc)
    for contract in CONTRACT_FLAGS:
        header_flags(compiler, flags_for(contract), Path(cache_dir), cpu_signature())


def _check_loadable(so_path: Path, command: tuple[str, ...], source_path: Path) -> None:
    """A compiler that exits 0 must have written an object that loads; nothing else is cached."""
    problem = load_problem(so_path)
    if problem is None:
        return
    size = so_path.stat().st_size if so_path.exists() else 0
    if size and _openmp_runtime_missing(problem):
        fix = "install the OpenMP runtime (Debian/Ubuntu: apt-get install libgomp1), or set WEFT_CC=gcc"
    else:
        fix = (f"the compiler exited 0 but its output is {'empty' if not size else 'not a shared object'}; "
               "point WEFT_CC at a working C compiler (gcc or clang)")
    raise CompileError(
        f"the C compiler produced no loadable object: {' '.join(command)}\n"
        f"loading {so_path.name} ({size} bytes) failed: {problem}\nfix: {fix}",
        command=command, stderr=problem, source_path=str(source_path),
    )
