"""The markdown of a fusion benchmark summary (rows of ``benchmarks/fusion.py``).

Kept apart from the runner so the table can be rebuilt from a ``summary.json``::

    python -c "import json, sys; sys.path.insert(0, 'benchmarks'); import fusion_report as r;
               print(r.summary_markdown(json.load(open('benchmarks/results/fusion-STAMP/summary.json'))))"
"""

from __future__ import annotations

from pathlib import Path

FUSED, UNFUSED = "greedy", "unfused"


def fused_loses(row: dict) -> bool:
    return row["verdict"] == "fail" or row["speedup_of"] == row["unfused_label"]


def fused_members_text(row: dict, limit: int = 3) -> str:
    """The fused regions of a row's greedy plan, as member lists (the first ``limit``)."""
    regions = row.get("fusion", {}).get("fused", [])
    text = "; ".join("[" + " ".join(members) + "]" for members in regions[:limit])
    return text + (f"; ... ({len(regions) - limit} more)" if len(regions) > limit else "") if regions else "?"


def outcome(row: dict) -> str:
    """One honest word or phrase for the table: who won, by the rule."""
    if row["status"] != "ok":
        return "FAILED"
    if row["speedup_of"] == row["fused_label"]:
        return f"fused faster {row['speedup_factor']:.2f}x"
    if row["speedup_of"] == row["unfused_label"]:
        return f"fused SLOWER {row['speedup_factor']:.2f}x"
    if row["verdict"] == "fail":
        return "fused slower (regression)"
    if row["verdict"] == "inconclusive":
        return "inconclusive (noisy)"
    return "no clear difference"


def format_median(stats: dict | None) -> str:
    from weft.bench.report import format_seconds

    return "-" if not stats else format_seconds(stats["median_s"])


def format_params(params: dict) -> str:
    return ", ".join(f"{key}={value}" for key, value in params.items())


def region_text(region: dict) -> str:
    members = region["members"]
    inner = " ".join(members) if len(members) <= 4 else f"{members[0]} {members[1]} ... {members[-1]}"
    return f"[{inner}] ({len(members)} members, x{region['occurrences']})"


def row_name(row: dict) -> str:
    where = f" region {region_text(row['region'])}" if row.get("region") else ""
    return f"{row['workload']}{where} {row['contract']} @{row['threads']}"


def fusion_cell(fusion: dict) -> str:
    """Regions chosen (members), lowered fused (one-pass), BLAS calls unfused->fused."""
    if "fused_regions" not in fusion:
        return "? " + fusion.get("error", "")
    text = f"{fusion['fused_regions']} ({fusion['fused_members']}/{fusion['members']})"
    if "lowered_fused_regions" in fusion:
        text += f", {fusion['lowered_fused_regions']} lowered"
        one_pass = sum(1 for f in fusion[f"{FUSED}_lowered"] if f["one_pass"])
        text += f" ({one_pass} one-pass)" if one_pass else ""
        blas = fusion["blas_calls"]
        if blas[UNFUSED] or blas[FUSED]:
            text += f"; BLAS {blas[UNFUSED]}->{blas[FUSED]}"
    elif "error" in fusion:
        text += f"; lowering not inspected: {fusion['error']}"
    return text


def table_lines(rows: list[dict], regions: bool) -> list[str]:
    first = "| workload | region | threads | contract" if regions else "| workload | threads | contract"
    lines = [
        first + " | fused regions | unfused | fused | ratio | verdict | outcome | A/A floor | A/A |",
        "|---" * (12 if regions else 11) + "|",
    ]
    for row in rows:
        where = f" {region_text(row['region'])} |" if regions else ""
        ratio = f"{row['paired_ratio']:.3f}" if row.get("paired_ratio") is not None else "-"
        floor = f"{row['aa_floor']:.1%}" if row.get("aa_floor") is not None else "-"
        lines.append(
            f"| {row['workload']} |{where} {row['threads']} | {row['contract']} | {fusion_cell(row.get('fusion', {}))}"
            f" | {format_median(row.get('unfused'))} | {format_median(row.get('fused'))} | {ratio}"
            f" | {row.get('verdict') or 'failed'} | {outcome(row)} | {floor} | {row.get('aa_verdict') or '-'} |"
        )
    return lines


def summary_markdown(summary: dict) -> str:
    """The tables (and the sizes, losses and failures) as markdown."""
    settings = summary["settings"]
    whole = [row for row in summary["rows"] if not row.get("region")]
    regions = [row for row in summary["rows"] if row.get("region")]
    lines = [
        f"Run {summary['recorded_at']} at Weft commit `{summary['provenance'].get('commit', '?')[:12]}`"
        f"{' (tree had local changes under weft/)' if summary['provenance'].get('dirty') else ''},"
        f" {summary['provenance'].get('cpu_model', '?')}, {settings['blocks']} timed palindrome blocks"
        f" (+{settings['warmup']} warm-up) of ~{settings['round_s'] * 1e3:g} ms rounds"
        f"{'; QUICK smoke run: tiny sizes, the times mean nothing' if settings['quick'] else ''}."
        f" Command: `{summary['command']}`.",
        "",
        "Times are medians per step; ratio = median over blocks of fused/unfused (below 1: fused faster);"
        " verdict is the non-regression rule of docs/benchmarking.md (pass = fused not slower beyond"
        " max(2%, 2 x spread); fail = fused regressed); a speed-up is claimed only when every round of one arm"
        " beats every round of the other by more than the A/A floor. Fused regions: regions the greedy engine"
        " chose (their members / all members), how many the compile lowered as one fused function (of them,"
        " how many in the rescaled one-pass form of Inference; the rest"
        " are lowered member by member, e.g. scratch over budget), and BLAS calls unfused->fused where any"
        " (a member inside a fused region never calls BLAS).",
        "",
        *table_lines(whole, regions=False),
    ]
    if regions:
        lines += [
            "",
            "Each distinct fused region alone (a stage plan: the region's members, its inputs"
            " random, as `weft bench --stage`), x = how often it occurs in the plan:",
            "",
            *table_lines(regions, regions=True),
        ]
    lines += ["", "Sizes used:", ""]
    lines += [f"- {name}: {format_params(params)}" for name, params in summary["sizes"].items()]
    weak = sorted(
        {
            (row["workload"], row["contract"], row["parity"]["reference"])
            for row in summary["rows"]
            if row.get("parity") and row["parity"]["reference"] != "oracle" and not row.get("region")
        }
    )
    if weak:
        lines += [
            "",
            "Parity was checked against the oracle except (the oracle is too slow at these sizes):",
            "",
        ]
        lines += [
            f"- {workload} {contract}: against the {reference}" for workload, contract, reference in weak
        ]
    losing = [row for row in summary["rows"] if row["status"] == "ok" and fused_loses(row)]
    if losing:
        lines += [
            "",
            "Where the fused plan loses (regression by the rule, or every unfused round faster):",
            "",
        ]
        for row in losing:
            detail = "" if row.get("region") else f"; fused: {fused_members_text(row)}"
            lines.append(f"- {row_name(row)}: ratio {row['paired_ratio']:.3f}, {outcome(row)}{detail}")
    failed = [row for row in summary["rows"] if row["status"] != "ok"]
    if failed:
        lines += ["", "Failed comparisons (recorded, not dropped):", ""]
        for row in failed:
            error = row["error"].replace("\n", " / ")
            lines.append(f"- {row_name(row)}: {error}")
            if row.get("unfused_error"):
                lines.append(f"  - the unfused arm alone also failed: {row['unfused_error']}")
    lines += [
        "",
        "Raw results (re-judge with `weft bench --recompute FILE`): " + f"`{summary['out_dir']}/`",
        "",
    ]
    return "\n".join(lines)


DOC_BEGIN, DOC_END = "<!-- fusion-results:begin -->", "<!-- fusion-results:end -->"


def write_doc(markdown: str, path: Path) -> None:
    """Replace the text between the result markers of ``path`` with ``markdown``."""
    text = path.read_text()
    if DOC_BEGIN not in text or DOC_END not in text:
        raise SystemExit(f"{path} has no {DOC_BEGIN} ... {DOC_END} markers to write the results between")
    head, _, rest = text.partition(DOC_BEGIN)
    _, _, tail = rest.partition(DOC_END)
    path.write_text(f"{head}{DOC_BEGIN}\n{markdown}\n{DOC_END}{tail}")
