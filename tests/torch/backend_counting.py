"""What the torch tests observe of Weft's backend: a counting ``torch.compile`` backend and a
recorder of the backend's reports."""

from __future__ import annotations

import weft.torch as wt


class CountingBackend:
    """``weft.torch.backend``, keeping each result: one per dynamo graph."""

    def __init__(self) -> None:
        self.compiled = []

    def __call__(self, gm, example_inputs, **kwargs):
        result = wt.backend(gm, example_inputs, **kwargs)
        self.compiled.append(result)
        return result

    def weft_graphs(self) -> list:
        return [graph for compiled in self.compiled for graph in compiled.weft_graphs]

    def plan_compiles(self) -> int:
        return sum(graph.compiles for graph in self.weft_graphs())


class Recorder(list):
    """``with Recorder() as reports``: every report the backend makes inside the block."""

    def __enter__(self):
        self.token = wt._REPORTS.set(self)
        return self

    def __exit__(self, *exc):
        wt._REPORTS.reset(self.token)
