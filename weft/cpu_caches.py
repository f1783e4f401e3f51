"""The CPU's data cache sizes, read from /sys: a machine fact that both the lowering
(the contraction's panel sizes, ``weft.lower.contraction``) and the cost model
(``weft.cost.machine``) read, so it lives in neither package."""

from __future__ import annotations

import glob
from pathlib import Path


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text) if text else 0


def cache_sizes() -> dict[str, int]:
    """Data/unified cache size per level in bytes, from /sys (0 where unknown)."""
    sizes = {"l1d": 0, "l2": 0, "l3": 0}
    for folder in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            level = Path(folder, "level").read_text().strip()
            kind = Path(folder, "type").read_text().strip()
            size = _parse_size(Path(folder, "size").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        key = "l1d" if level == "1" else f"l{level}"
        if key in sizes:
            sizes[key] = size
    return sizes
