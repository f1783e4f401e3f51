"""Writing files atomically: a reader sees the whole old file or the whole new one.

Every file Weft stores (compiled objects and their sources, cache entries, the machine
profile, benchmark results) is written to a temporary name in the same folder and renamed
over the target (``os.replace``). Two processes writing the same path both succeed; the
last rename wins.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` atomically (text as UTF-8); the parent folder must exist."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return path
