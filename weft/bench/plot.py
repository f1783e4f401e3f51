"""``--plot FILE.png``: each arm's rounds over time, and a roofline of the members."""

from __future__ import annotations

from pathlib import Path

from weft.bench.arms import BenchError


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError:
        raise BenchError("--plot needs matplotlib: pip install 'weft[plot]'") from None
    return pyplot


def plot_rounds(axes, section: dict) -> None:
    series: dict[str, tuple[list[int], list[float]]] = {}
    index = 0
    for block in section["blocks"]:
        for label, seconds in zip(block["order"], block["seconds"], strict=False):
            xs, ys = series.setdefault(label, ([], []))
            xs.append(index)
            ys.append(seconds * 1e3)
            index += 1
    for label, (xs, ys) in series.items():
        axes.plot(xs, ys, "o-", label=label, markersize=3)
    axes.set_xlabel("round (execution order)")
    axes.set_ylabel("ms per call")
    axes.set_title("rounds of each arm (palindrome blocks)")
    axes.legend(fontsize="small")


def plot_roofline(axes, points: list[dict], bandwidth: float, peak: float) -> None:
    """points: {name, intensity (FLOP/B), achieved (FLOP/s)}."""
    import numpy as np

    ridge = peak / bandwidth
    low = min([p["intensity"] for p in points] + [ridge / 100])
    high = max([p["intensity"] for p in points] + [ridge * 100])
    xs = np.logspace(np.log10(max(low / 2, 1e-3)), np.log10(high * 2), 200)
    axes.loglog(xs, np.minimum(peak, xs * bandwidth) / 1e9, "k-", label="roof")
    axes.axvline(ridge, color="grey", linestyle=":", label=f"ridge {ridge:.1f} FLOP/B")
    for point in points:
        axes.loglog(point["intensity"], max(point["achieved"], 1.0) / 1e9, "o")
        axes.annotate(point["name"], (point["intensity"], max(point["achieved"], 1.0) / 1e9), fontsize="x-small")
    axes.set_xlabel("arithmetic intensity (FLOP/byte)")
    axes.set_ylabel("GFLOP/s")
    axes.set_title("roofline")
    axes.legend(fontsize="small")


def save_bench_plot(path: Path, section: dict, members: list[dict] | None, bandwidth: float, peak: float) -> Path:
    pyplot = _pyplot()
    figure, (left, right) = pyplot.subplots(1, 2, figsize=(12, 4.5))
    plot_rounds(left, section)
    if members:
        plot_roofline(right, members, bandwidth, peak)
    else:
        right.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return Path(path)
