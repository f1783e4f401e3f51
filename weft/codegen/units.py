"""A C source cut into translation units that compile concurrently (``weft.codegen.driver``).

A source may mark where it can be cut: a line equal to ``UNIT_BREAK``. The text before the
first mark is the *head* (the prelude, the shared declarations and every function's
prototype), repeated at the top of each unit; the text between marks is a *chunk* (one
lowered function, a runner, a definition), which goes to exactly one unit. So a function's
C is still compiled once, whatever the number of units, and the source without its marks'
meaning (one file, head then chunks in order) is the same program as a single unit.

Chunks are dealt to at most ``jobs`` units, the largest first to the lightest unit (their
size in bytes is the estimate of their compile time); a source with less than
``UNIT_BYTES`` of chunks per unit is not cut further (each extra unit parses the head
again, ~0.25 s of the compiler with ``immintrin.h``). Every chunk is preceded by a
``#line`` directive, so the compiler's messages name lines of the whole stored source.
"""

from __future__ import annotations

UNIT_BREAK = "/* weft: translation unit */"

# a function one unit defines and another calls has external linkage, hidden in the shared
# object: called directly (never through the PLT), and no symbol outside it
HIDDEN = '__attribute__((visibility("hidden")))'

UNIT_BYTES = 120_000  # chunks per unit: ~1 s of gcc -O3 each, several head parses


def translation_units(source: str, jobs: int, source_name: str, unit_bytes: int | None = None) -> list[str]:
    """The units to compile for ``source``: ``[source]`` when it has no marks, ``jobs`` is 1
    or its chunks are too small to share; else 2..``jobs`` units (head + chunks, balanced by
    size, each unit's chunks in the source's order). ``source_name`` names the whole source
    in the ``#line`` directives."""
    unit_bytes = UNIT_BYTES if unit_bytes is None else unit_bytes
    lines = source.split("\n")
    marks = [number for number, line in enumerate(lines) if line == UNIT_BREAK]
    if not marks or jobs < 2:
        return [source]
    head = "\n".join(lines[:marks[0]])
    chunks = []  # (first line number, 1-based, in the whole source; text)
    for start, end in zip(marks, marks[1:] + [len(lines)], strict=True):
        text = "\n".join(lines[start + 1:end])
        if text.strip():
            chunks.append((start + 2, text))
    total = sum(len(text) for _, text in chunks)
    count = min(jobs, len(chunks), max(1, total // max(1, unit_bytes)))
    if count < 2:
        return [source]
    bins: list[list[int]] = [[] for _ in range(count)]
    sizes = [0] * count
    for index in sorted(range(len(chunks)), key=lambda index: (-len(chunks[index][1]), index)):
        lightest = min(range(count), key=lambda unit: (sizes[unit], unit))
        bins[lightest].append(index)
        sizes[lightest] += len(chunks[index][1])
    quoted = source_name.replace("\\", "\\\\").replace('"', '\\"')
    units = []
    for members in bins:
        parts = [head]
        for index in sorted(members):
            first, text = chunks[index]
            parts += [f'#line {first} "{quoted}"', text]
        units.append("\n".join(parts) + "\n")
    return units
