"""Interleaved order of rounds: palindrome blocks, alternately forward and reversed.

For two arms the blocks are ``A B B A``, ``B A A B``, ``A B B A``... so slow drift
of the machine hits both arms equally. More arms extend the palindrome::

    >>> block_order(("A", "A:control", "B"), 0)
    ('A', 'A:control', 'B', 'B', 'A:control', 'A')
    >>> block_order(("A", "B"), 1)
    ('B', 'A', 'A', 'B')

Across processes (``--processes N``) the same shape appears one level up: each round
starts one fresh process per arm, in forward order on even rounds and reversed on
odd ones, and two consecutive rounds make one palindrome block.
"""

from __future__ import annotations

from collections.abc import Sequence


def block_order(arms: Sequence[str], index: int) -> tuple[str, ...]:
    """The execution order of block ``index``: forward-then-back, reversed on odd blocks."""
    if len(set(arms)) != len(arms):
        raise ValueError(f"arm labels must be distinct, got {list(arms)}")
    order = tuple(arms) if index % 2 == 0 else tuple(reversed(arms))
    return order + tuple(reversed(order))


def schedule(arms: Sequence[str], blocks: int) -> list[tuple[str, ...]]:
    """Orders of ``blocks`` consecutive blocks."""
    return [block_order(arms, index) for index in range(blocks)]


def process_round_order(arms: Sequence[str], round_index: int) -> tuple[str, ...]:
    """Order in which a round of fresh processes runs the arms (reversed each round)."""
    return tuple(arms) if round_index % 2 == 0 else tuple(reversed(arms))
