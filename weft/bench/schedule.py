"""Interleaved order of rounds: palindrome blocks whose outer arm changes every block.

For two arms the blocks are ``A B B A``, ``B A A B``, ``A B B A``... so slow drift
of the machine hits both arms equally. More arms extend the palindrome and rotate
it one place per block, so every arm takes every ring of the palindrome in turn
(the outer ring sits next to the block boundary, the inner one runs twice in a row;
an A/A control that always sat in the same ring as its twin could differ by that
alone)::

    >>> block_order(("A", "A:control", "B"), 0)
    ('A', 'A:control', 'B', 'B', 'A:control', 'A')
    >>> block_order(("A", "A:control", "B"), 1)
    ('A:control', 'B', 'A', 'A', 'B', 'A:control')
    >>> block_order(("A", "B"), 1)
    ('B', 'A', 'A', 'B')

Across processes (``--processes N``) the same shape appears one level up: each round
starts one fresh process per arm, in forward order on even rounds and reversed on
odd ones, and two consecutive rounds make one palindrome block.
"""

from __future__ import annotations

from collections.abc import Sequence


def block_order(arms: Sequence[str], index: int) -> tuple[str, ...]:
    """The execution order of block ``index``: the arms rotated ``index`` places, then back."""
    if len(set(arms)) != len(arms):
        raise ValueError(f"arm labels must be distinct, got {list(arms)}")
    shift = index % len(arms)
    order = tuple(arms[shift:]) + tuple(arms[:shift])
    return order + tuple(reversed(order))


def schedule(arms: Sequence[str], blocks: int) -> list[tuple[str, ...]]:
    """Orders of ``blocks`` consecutive blocks."""
    return [block_order(arms, index) for index in range(blocks)]


def process_round_order(arms: Sequence[str], round_index: int) -> tuple[str, ...]:
    """Order in which a round of fresh processes runs the arms (reversed each round)."""
    return tuple(arms) if round_index % 2 == 0 else tuple(reversed(arms))
