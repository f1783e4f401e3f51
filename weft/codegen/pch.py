"""A precompiled header of the system headers every generated file includes.

Parsing ``immintrin.h`` and its kin costs GCC about 0.2 s in every translation unit, as much
as the rest of a race's two contenders (measured on Zen 4: a 93 kB race source compiled in
0.48 s, 0.28 s with the header precompiled). GCC reads ``wf_headers.h.gch`` in place of
``wf_headers.h`` when the flags it was built with match, and the header's text otherwise, so
a stale or foreign ``.gch`` costs time, never correctness; the generated source includes the
same headers itself (their guards make the second inclusion empty).

Built once per (compiler, flags, CPU) under ``<cache_dir>/machine/pch-<key>/``, the folder
of the machine profile (a one-time cost per machine, about 1 s per contract, not a
compile's), and published by renaming a finished folder (a reader never sees half a file).
GCC only: another compiler (clang reads its own format) compiles without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from weft.codegen.prelude import HEADER_TEXT

HEADER_NAME = "wf_headers.h"
BUILD_TIMEOUT_S = 120


def _header() -> str:
    return f"#ifndef WF_HEADERS_H\n#define WF_HEADERS_H\n{HEADER_TEXT}#endif\n"


def uses_gcc_headers(version: str) -> bool:
    """Whether the compiler whose ``--version`` line is ``version`` reads GCC's ``.gch``."""
    lowered = version.lower()
    return not any(word in lowered for word in ("clang", "intel", "icx", "tcc"))


def header_flags(compiler, flags: tuple[str, ...], cache_dir: Path, cpu: str, may_build: bool = True) -> tuple[str, ...]:
    """The flags that make every unit start from the precompiled header (building it first if
    this cache has none for ``compiler``, ``flags`` and ``cpu`` and ``may_build``: a timed
    build, a race's, does not spend its time on it), or () where the compiler is not GCC or
    the header is not there or cannot be built (the source then parses its headers itself)."""
    if not uses_gcc_headers(compiler.version):
        return ()
    compile_flags = tuple(flag for flag in flags if flag != "-shared")
    digest = hashlib.sha256("\0".join((compiler.path, compiler.version, " ".join(compile_flags), cpu,
                                       _header())).encode()).hexdigest()[:16]
    folder = Path(cache_dir) / "machine" / f"pch-{digest}"
    ready = (folder / f"{HEADER_NAME}.gch").is_file() and (folder / HEADER_NAME).is_file()
    if not ready and not (may_build and _build(compiler, compile_flags, folder)):
        return ()
    return ("-I", str(folder), "-include", HEADER_NAME)


def _build(compiler, compile_flags: tuple[str, ...], folder: Path) -> bool:
    """Compile the header in a private folder and rename it into place; False if it fails."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    except OSError:
        return False
    try:
        (work / HEADER_NAME).write_text(_header())
        done = subprocess.run([compiler.path, *compile_flags, "-x", "c-header", "-o", str(work / f"{HEADER_NAME}.gch"),
                               str(work / HEADER_NAME)], capture_output=True, timeout=BUILD_TIMEOUT_S, check=False)
        if done.returncode != 0 or not (work / f"{HEADER_NAME}.gch").is_file():
            return False
        try:
            os.rename(work, folder)
        except OSError:  # another process published it first: use theirs
            return (folder / f"{HEADER_NAME}.gch").is_file()
        return True
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)

