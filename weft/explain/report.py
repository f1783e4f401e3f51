"""The explanation of a partition: what grew from where, what fused, what did not and why.

    plan attention: 6 members, 1 region (policy greedy, contract inference)
    anchor o
      candidates: [o] -> [p o] -> [l p o] -> [e l p o] -> [m e l p o] -> [s m e l p o]
      chosen: s m e l p o  (preferred tile axis i; private s, m, e, l, p)  signature 3f2a...
      rewrite: one pass over j1:16 replaces 3 folds; running max m; ...
    unfused: (none)

The region's *preferred* tile axis (its longest common anchor axis) is not always
the axis the lowering tiles: ``weft.lower.fused.choose_tiling`` takes the outermost
common axis that gives enough tiles (multi-head attention: the heads ``h``, in tiles
of one). Without a lowering the text says "preferred tile axis"; given one
(``compiled.explain()``, ``weft explain --lowering``) it says what was tiled, read back
from the tiling the lowered function's tile loop records: "tiled along h (tiles of 1), preferred i".
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.codegen.cpu import cpu_features, lanes_for
from weft.compose.partition import Partition
from weft.compose.regions import Region, plan_anchors
from weft.compose.rescale import OnlineFold, RewriteRefusal, derive_online_fold, pass_schedule
from weft.compose.signature import region_signature
from weft.config import Config, config_from_env
from weft.errors import ConfigError
from weft.fuse import choose_partition, fuse
from weft.ir import Plan
from weft.lower.fused import blas_lost
from weft.lower.online import one_pass_declined
from weft.lower.schedule import Target, default_views
from weft.runtime.binding import scipy_sgemm_pointer


@dataclass(frozen=True, slots=True)
class RegionReport:
    region: Region
    candidates: tuple[tuple[str, ...], ...]
    signature: str
    rewrite: OnlineFold | RewriteRefusal | None
    blas_lost: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Explanation:
    """Everything ``explain`` prints, as data (tests inspect this, not the text)."""

    plan_name: str
    member_count: int
    partition: Partition
    reports: tuple[RegionReport, ...]
    anchors: tuple[str, ...] = ()
    plan: Plan | None = None
    lowered: object | None = None  # the LoweredPlan of this compile, when known
    show_prices: bool = False  # fusion="priced": every candidate's verdict, not only the chosen one

    def tiling_for(self, anchor: str) -> tuple[tuple[str, int], ...] | None:
        """(anchor axis, tile size) per axis the lowering actually tiles for region ``anchor``,
        outermost first (empty: one tile holds the whole region); None without a lowering."""
        if self.lowered is None or self.plan is None:
            return None
        region = self.report_for(anchor).region
        for function in self.lowered.functions:
            if function.members == region.members:
                return lowered_tiling(self.plan, region, function)
        return None

    def report_for(self, anchor: str) -> RegionReport:
        for report in self.reports:
            if report.region.anchor == anchor:
                return report
        raise KeyError(anchor)

    def rewrites(self) -> tuple[OnlineFold, ...]:
        return tuple(r.rewrite for r in self.reports if isinstance(r.rewrite, OnlineFold))

    def text(self) -> str:
        return format_explanation(self)


def explain_partition(plan: Plan, partition: Partition, lowered=None) -> Explanation:
    growths = {growth.anchor: growth for growth in partition.growths}
    views = default_views(plan)
    reports = []
    for region in partition.regions:
        growth = growths.get(region.anchor)
        candidates = tuple(c.members for c in growth.candidates) if growth else (region.members,)
        rewrite = derive_online_fold(plan, region, partition.contract) if region.is_fused else None
        lost = blas_lost(plan, region, views) if partition.contract == "inference" else ()
        reports.append(RegionReport(region, candidates, region_signature(plan, region, partition.contract), rewrite, lost))
    return Explanation(plan.name, len(plan.kernels), partition, tuple(reports), plan_anchors(plan), plan, lowered)


def explain_plan(plan: Plan, policy: str = "greedy", contract: str = "strict", target=None, lowered=None) -> Explanation:
    """Choose regions for ``plan`` exactly as ``weft.compile`` does (asking the lowering
    which candidates fit, for ``target``: by default this CPU's lanes) and explain them.

    With ``lowered`` (the compile's ``LoweredPlan``) the text states the axes each
    region's function actually tiles, not only the region's preferred tile axis. Policies
    ``"off"`` and ``"greedy"`` only: what ``"priced"`` and ``"matchers"`` decide is a compile's
    (``weft.compile(plan, fusion="priced").explain()``, ``weft explain --prices``)."""
    _fuse_on_sight(policy)
    if target is None:
        target = Target(lanes=lanes_for(cpu_features()), contract=contract)
    partition = choose_partition(plan, Config(contract=contract, fusion=policy), target)
    return explain_partition(plan, partition, lowered)


def _fuse_on_sight(policy: str) -> None:
    if policy not in ("off", "greedy"):
        raise ConfigError(f"explain_plan explains fusion 'off' or 'greedy', not {policy!r}: compile the plan with"
                          f" fusion={policy!r} and call .explain() (or run `weft explain --fusion {policy}`)")


def explain_lowering(plan: Plan, policy: str = "greedy", contract: str = "strict", target=None, threads: int = 1) -> str:
    """The explanation of ``plan`` and what each region lowers to, as ``weft.compile`` would
    lower it for ``target`` (by default this CPU's lanes, BLAS where a compile would use it)
    at ``threads``; policies ``"off"`` and ``"greedy"`` (see ``explain_plan``)."""
    _fuse_on_sight(policy)
    if target is None:
        blas = contract == "inference" and scipy_sgemm_pointer() is not None
        target = Target(lanes=lanes_for(cpu_features()), contract=contract, use_blas=blas)
    lowered, _ = fuse(plan, config_from_env(contract=contract, fusion=policy, threads=threads), target)
    explanation = explain_plan(plan, policy, contract, target, lowered)
    return explanation.text() + "\n" + format_lowering(lowered)


def lowered_tiling(plan: Plan, region: Region, function) -> tuple[tuple[str, int], ...] | None:
    """(anchor axis, tile size), outermost first, for each axis ``function``'s tile loop cuts
    into more than one tile, read from the tiling the loop records (``TileLoop.tiles``).

    None when the function has no tile loop or the loop records no tiling (then explain
    claims nothing about the lowering). Empty: one tile holds the whole region.
    """
    loop = function.tile_loop
    if loop is None or not loop.tiles:
        return None
    extents = {axis.name: axis.extent for axis in plan.kernel(region.anchor).axes}
    if any(axis not in extents for axis, _, _ in loop.tiles):
        return None
    return tuple((axis, size) for axis, extent, size in loop.tiles if -(-extent // size) > 1)


def describe_tiling(tiling: tuple[tuple[str, int], ...], preferred: str | None) -> str:
    """``tiled along h (tiles of 1), preferred i``: what the lowering cut, and the preferred
    axis when the innermost tiled axis is not it."""
    if not tiling:
        return f"one tile: nothing tiled (preferred tile axis {preferred or '-'})"
    text = "tiled along " + ", ".join(f"{axis} (tiles of {size})" for axis, size in tiling)
    if tiling[-1][0] != preferred:
        text += f", preferred {preferred or '-'}"
    return text


def _short(members: tuple[str, ...]) -> str:
    return "[" + " ".join(members) + "]"


def format_explanation(explanation: Explanation) -> str:
    partition = explanation.partition
    fused = partition.fused
    lines = [
        f"plan {explanation.plan_name}: {explanation.member_count} members, {len(partition.regions)} region(s),"
        f" {len(fused)} fused (policy {partition.policy}, contract {partition.contract})"
    ]
    for report in explanation.reports:
        region = report.region
        if not region.is_fused and (len(report.candidates) < 2 or partition.policy == "off" and region.anchor not in explanation.anchors):
            continue
        lines.append(f"anchor {region.anchor}")
        lines.append(f"  candidates: {' -> '.join(_short(c) for c in report.candidates)}")
        cut = partition.cutback_for(region.anchor)
        if cut is not None:
            lines.append(f"  cut back: {cut.describe()}")
        lines.extend(format_prices(partition, region, explanation.show_prices))
        if not region.is_fused:
            lines.append(f"  chosen: {region.anchor} alone (fusion={partition.policy!r})")
            continue
        tile = region.tile_axis or "-"
        extra = [name for name in region.outputs if name != region.anchor]
        tiling = explanation.tiling_for(region.anchor)
        details = f"preferred tile axis {tile}" if tiling is None else describe_tiling(tiling, region.tile_axis)
        if region.private:
            details += f"; private {', '.join(region.private)}"
        if extra:
            details += f"; also outputs {', '.join(extra)}"
        lines.append(f"  chosen: {' '.join(region.members)}  ({details})  signature {report.signature}")
        if tiling is None:
            tiles = ", ".join(f"{member}.{axis}" for member, axis in region.tile_axes)
            lines.append(f"  preferred tile axis per member: {tiles}")
        elif tiling:
            maps = dict(region.tile_maps) if region.tile_maps else {region.tile_axis: region.tile_axes}
            tiled = [axis for axis, _ in tiling]
            tiles = ", ".join(
                f"{member}.{axis}" for member in region.members for name in tiled
                for m, axis in maps.get(name, ()) if m == member
            )
            lines.append(f"  tiled {'axes' if len(tiled) > 1 else 'axis'} per member: {tiles}")
        for member in report.blas_lost:
            lines.append(
                f"  BLAS: contraction member {member} loses its BLAS body inside region {region.anchor}"
                " (unfused, with BLAS available, it would call sgemm; fused it is a tiled loop nest: for the cost model to weigh)"
            )
        match report.rewrite:
            case OnlineFold() as online:
                lines.append(f"  rewrite: fired: {online.describe()}")
                declined = (one_pass_declined(explanation.plan, region, online, pass_schedule(explanation.plan, region, online))
                            if explanation.plan else None)
                if declined:
                    lines.append(f"  lowering: one pass not used: {declined}")
            case RewriteRefusal(reason=reason, applicable=True):
                lines.append(f"  rewrite: not applied: {reason}")
            case RewriteRefusal(reason=reason):
                lines.append(f"  rewrite: does not apply: {reason}")
            case None:
                lines.append("  rewrite: no fold reads another fold over its axis")
    if partition.policy == "priced":
        lines.append(format_pricing_summary(partition))
    strict_refused = [
        report.region.anchor for report in explanation.reports
        if isinstance(report.rewrite, RewriteRefusal) and report.rewrite.applicable
    ]
    lines.append("unfused members:" if partition.unfused else "unfused members: none")
    for member, reasons in partition.unfused:
        lines.append(f"  {member}: " + "; ".join(reasons))
    if strict_refused:
        lines.append(
            f"rewrite left out under {partition.contract}: regions {', '.join(strict_refused)}"
            " (Strict forbids the rewrite; compile with contract='inference' to allow it)"
        )
    return "\n".join(lines)


def format_prices(partition: Partition, region: Region, every: bool) -> list[str]:
    """Per region (fusion="priced"): the chosen candidate's predicted unfused and fused cycles,
    tiling and margin; with ``every``, each candidate's verdict."""
    decision = next((d for d in partition.decisions if region.anchor == d.anchor), None)
    if decision is None:
        return []
    lines = []
    for members, verdict in decision.verdicts:
        taken = members == decision.taken
        if taken or every:
            mark = "price (chosen)" if taken else "price"
            lines.append(f"  {mark} [{' '.join(members)}]: {verdict.describe()}")
    if not every and not region.is_fused and decision.verdicts:
        best = max(decision.verdicts, key=lambda item: item[1].margin if item[1].status == "priced" else -1e9)
        lines.append(f"  best price not taken [{' '.join(best[0])}]: {best[1].describe()}")
    return lines


def format_pricing_summary(partition: Partition) -> str:
    """How the pricing phase went: signatures priced, unpriced (and why), time against the budget."""
    report = partition.pricing
    unpriced = sum(decision.unpriced for decision in partition.decisions)
    if report is None:
        return f"pricing: {unpriced} candidate(s) unpriced"
    text = (f"pricing: {report.signatures} signature(s) surveyed, {report.priced} priced in {report.seconds * 1e3:.0f} ms"
            f" of a {report.budget_s * 1e3:.0f} ms share")
    if unpriced or report.unpriced:
        text += (f"; {unpriced} candidate(s) ({len(report.unpriced)} signature(s)) left unpriced: the budget ran"
                 " out before them (they stay unfused; raise WEFT_BUDGET_S to price them)")
    else:
        text += "; every candidate priced"
    return text


def format_lowering(lowered) -> str:
    """What was actually emitted per region: tile loop, scratch, and whether the one-pass form was used.

    A region may be lowered less fused than chosen (scratch over budget, or an
    index map the one-pass form cannot follow); this is where that shows.
    """
    lines = ["lowered:"]
    for function in lowered.functions:
        kinds = {type(nest).__name__ for nest in function.nests}
        parts = [f"{function.name}: {' '.join(function.members)}"]
        if function.tile_loop is not None:
            loop = function.tile_loop
            count = -(-loop.extent // loop.size)
            parts.append(f"{count} tile{'s' if count != 1 else ''}{' (parallel)' if loop.parallel else ''}")
        if function.scratch:
            parts.append(f"scratch {sum(s.elements * s.dtype.itemsize for s in function.scratch)} B per tile")
        if "OnlinePass" in kinds:
            online = next(nest for nest in function.nests if type(nest).__name__ == "OnlinePass")
            form = (", scores and folds on the register tile" if getattr(online, "tile", None) is not None
                    else ", scores on the register tile" if getattr(online, "scores", None) is not None else "")
            parts.append(f"one pass (rescaled){form}")
        if "GemmCall" in kinds:
            parts.append("BLAS")
        if "LibraryCall" in kinds:
            parts.append("library body " + ", ".join(nest.body for nest in function.nests))
        lines.append("  " + "; ".join(parts))
    return "\n".join(lines)
