"""Weft's differential fuzzer: random programs over the whole ``weft.nn`` surface,
compiled and compared with the oracle (Strict) or a float64 evaluator (Inference);
a failure is shrunk to a small program and printed as runnable Python.

    python -m weft.fuzz --programs 300 --contract inference --fusion greedy

See ``weft.fuzz.cli`` for the options and README's "Differential fuzzer" section.
"""

from weft.fuzz.check import check_outputs
from weft.fuzz.program import make_input

__all__ = ["check_outputs", "make_input"]
