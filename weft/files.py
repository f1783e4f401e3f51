"""Writing files atomically: a reader sees the whole old file or the whole new one.

Every file Weft stores (compiled objects and their sources, cache entries, the machine
profile, benchmark results) is written to a temporary name in the same folder and renamed
over the target (``os.replace``). Two processes writing the same path both succeed; the
last rename wins. Files get the permissions a plainly created file would (``0666`` less
the umask; ``mkstemp`` alone leaves ``0600``), so a group sharing a cache can read them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    """The process umask, read without changing it where Linux reports it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: the classic read-by-setting (set back at once)
    os.umask(mask)
    return mask


def normal_permissions(path_or_handle: Path | str | int, executable: bool = False) -> None:
    """The mode a plainly created file gets (mkstemp leaves 0600, unreadable to the group)."""
    mode = (0o777 if executable else 0o666) & ~_umask()
    if isinstance(path_or_handle, int):
        os.fchmod(path_or_handle, mode)
    else:
        os.chmod(path_or_handle, mode)


def write_atomic(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` atomically (text as UTF-8); the parent folder must exist."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        normal_permissions(handle)
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return path
