"""``explain``: a report over composition and lowering (docs/design.md section 7).

It reads the regions ``weft.compose`` chose (anchors, candidates, cut-backs, the
rewrite, unfused members and why) and, given a compile's ``LoweredPlan``, the
tiling each region's function actually uses, from the lowered function's fields.
It sits above ``weft.compose`` and ``weft.lower`` (neither imports it).
"""

from weft.explain.report import (
    Explanation,
    RegionReport,
    describe_tiling,
    explain_lowering,
    explain_partition,
    explain_plan,
    format_explanation,
    format_lowering,
    lowered_tiling,
)

__all__ = [
    "Explanation", "RegionReport", "describe_tiling", "explain_lowering", "explain_partition", "explain_plan", "format_explanation",
    "format_lowering", "lowered_tiling",
]
