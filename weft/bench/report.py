"""Readable tables of a benchmark result (rich), and a progress bar for long runs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from weft.bench.verdict import Verdict


def wide_console() -> Console:
    """A console at least 140 columns wide, so tables stay readable when piped to a file."""
    console = Console()
    return console if console.is_terminal and console.width >= 140 else Console(width=max(console.width, 140))


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 0:
        return "-" + format_seconds(-seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


@contextlib.contextmanager
def progress_bars(console: Console, enabled: bool = True) -> Iterator[Callable[[str, int], Callable[[], None]] | None]:
    """Yields ``start(description, total) -> tick()``; ``None`` when disabled."""
    if not enabled:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        def start(description: str, total: int) -> Callable[[], None]:
            task = progress.add_task(description, total=total)
            return lambda: progress.advance(task)
        yield start


def format_range(stats) -> str:
    """min / median / max in one unit, chosen from the median."""
    unit, scale = next(((u, k) for u, k in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)) if stats.median >= k), ("ns", 1e-9))
    def number(value: float) -> str:
        return f"{value:.3g}" if value < 1000 else f"{value:.0f}"

    return f"{number(stats.minimum / scale)} / {number(stats.median / scale)} / {number(stats.maximum / scale)} {unit}"


def verdict_table(title: str, verdicts: list[Verdict], roofline: dict | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("comparison", "verdict", "ratio", "spread", "allowed", "baseline min/med/max",
                   "candidate min/med/max", "speed-up"):
        table.add_column(column)
    for verdict in verdicts:
        b, c = verdict.baseline_stats, verdict.candidate_stats
        speed = f"{verdict.speedup_of} {verdict.speedup_factor:.2f}x" if verdict.speedup_of else "none claimed"
        style = {"pass": "green", "fail": "red", "inconclusive": "yellow"}[verdict.status]
        table.add_row(
            f"{verdict.candidate} vs {verdict.baseline}",
            f"[{style}]{verdict.status}[/{style}]",
            f"{verdict.paired_median_ratio:.3f}",
            f"{verdict.spread:.1%}",
            f"{verdict.allowed_regression:.1%}",
            format_range(b),
            format_range(c),
            speed,
        )
    return table


def roofline_table(roofline: dict) -> Table:
    table = Table(title=(f"Roofline: {roofline['flops']:.3g} FLOP, {roofline['compulsory_bytes']:.3g} B compulsory"
                         f" ({roofline['unfused_bytes']:.3g} B if every member round-trips memory)"),
                  title_justify="left")
    for column in ("arm", "median", "floor", "bound", "of floor", "bandwidth", "peak"):
        table.add_column(column)
    for label, row in roofline["arms"].items():
        table.add_row(label, format_seconds(row["median_s"]), format_seconds(row["floor_s"]), row["bound"],
                      f"{row['fraction_of_floor']:.1%}", f"{row['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s",
                      f"{row['peak_flops_per_s'] / 1e9:.0f} GFLOP/s")
    return table


def print_section(console: Console, name: str, section: dict, verdicts: list[Verdict]) -> None:
    console.print(verdict_table(name, verdicts))
    if verdicts:
        console.print(f"A/A floor {verdicts[0].floor:.1%}: two runs of the same arm differed this much here, so a"
                      " smaller difference between arms is noise.")
    if section.get("roofline"):
        console.print(roofline_table(section["roofline"]))
    if section.get("parity"):
        checks = ", ".join(f"{c['label']} {c['mode']} ok" for c in section["parity"]["checks"])
        console.print(f"parity against the {section['parity']['reference']}: {checks}")
    for label, reason in (section.get("unavailable") or {}).items():
        console.print(f"[yellow]arm {label} not run:[/yellow] {reason}")


def print_budget(console: Console, rows: list[dict]) -> None:
    table = Table(title="Budget illustration: stage saving x occurrences / whole-plan time", title_justify="left")
    for column in ("candidate", "stage saving", "x occurrences", "whole plan", "predicted", "measured whole"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["candidate"], format_seconds(row["stage_saving_s"]), str(row["occurrences"]),
                      format_seconds(row["whole_plan_s"]), f"{row['predicted_whole_saving']:.1%}",
                      f"{row['measured_whole_saving']:.1%}")
    console.print(table)
