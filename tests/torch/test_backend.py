"""The torch.compile backend end to end (compiled C): registration, options, fallbacks
reported (warning, explain, fallback='error'), dynamic sequence lengths, training graphs."""

import copy
import importlib.metadata
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")

from backend_counting import CountingBackend, Recorder  # noqa: E402

import weft.torch as wt  # noqa: E402
from weft.errors import ConfigError  # noqa: E402
from weft.testing import assert_inference_close  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    dynamo.reset()
    yield
    dynamo.reset()


class Block(torch.nn.Module):
    """Linear, layer norm, GELU, attention-like softmax: ops Weft lowers."""

    def __init__(self, dim=16, with_atan=False):
        super().__init__()
        self.up = torch.nn.Linear(dim, 2 * dim)
        self.norm = torch.nn.LayerNorm(2 * dim)
        self.down = torch.nn.Linear(2 * dim, dim)
        self.with_atan = with_atan

    def forward(self, x):
        h = torch.nn.functional.gelu(self.norm(self.up(x)))
        if self.with_atan:
            h = torch.atan(h) * h  # aten.atan: no lowering in Weft
        scores = torch.softmax(x @ x.transpose(-1, -2) / 4.0, -1)
        return self.down(h) + scores @ x


def reference(model, *inputs):
    widened = [t.double() for t in inputs]
    return model.double()(*widened).float().detach().numpy(), model.float()


def test_entry_point_declared_in_pyproject_and_resolves_to_the_backend():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["entry-points"]["torch_dynamo_backends"]["weft"]
    assert target == "weft.torch:backend"
    entry = importlib.metadata.EntryPoint(name="weft", value=target, group="torch_dynamo_backends")
    assert entry.load() is wt.backend
    assert project["project"]["optional-dependencies"]["torch"] == ["torch==2.13.0"]


def test_installed_distribution_registers_the_backend_name():
    found = [e for e in importlib.metadata.entry_points(group="torch_dynamo_backends") if e.name == "weft"]
    if not found:
        pytest.skip("the installed weft distribution predates the entry point; `pip install -e .` registers it")
    assert found[0].value == "weft.torch:backend"
    model = Block().eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        got = torch.compile(model, backend="weft")(x)
        assert_inference_close(got.numpy(), model(x).numpy())


def test_compiled_block_matches_eager_with_no_fallback():
    model = Block().eval()
    x = torch.randn(2, 5, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", wt.WeftFallbackWarning)
        with torch.no_grad():
            got = torch.compile(model, backend=wt.backend, options={"threads": 1})(x)
    want, model = reference(model, x)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    assert_inference_close(got.numpy(), want)


def test_backend_accepts_the_mode_keyword_and_checks_options():
    model = Block().eval()
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        got = torch.compile(model, backend=wt.backend, mode="max-autotune")(x)  # torch passes mode=
    assert_inference_close(got.numpy(), reference(model, x)[0])
    gm = torch.fx.symbolic_trace(model)
    with pytest.raises(ConfigError, match="unknown option"):
        wt.backend(gm, [x], options={"speed": "max"})
    with pytest.raises(ConfigError, match="fallback"):
        wt.backend(gm, [x], options={"fallback": "ignore"})
    with pytest.raises(ConfigError, match="contract"):
        wt.backend(gm, [x], mode="default", options={"contract": "fast"})


def test_strict_contract_option_reaches_weft_compile():
    model = Block().eval()
    x = torch.randn(2, 3, 16)
    counting = CountingBackend()
    with torch.no_grad():
        got = torch.compile(model, backend=counting, options={"contract": "strict", "fusion": "off"})(x)
    assert_inference_close(got.numpy(), reference(model, x)[0])
    (graph,) = counting.compiled[0].weft_graphs
    (runnable,) = graph.specializations.values()
    calls = [n.target for n in runnable.graph.nodes if isinstance(n.target, wt.graph.PlanCall)]
    assert calls and all(c.compiled.config.contract == "strict" and c.compiled.config.fusion == "off" for c in calls)


def test_unsupported_op_warns_naming_it_and_gives_the_right_answer():
    model = Block(with_atan=True).eval()
    x = torch.randn(2, 5, 16)
    with pytest.warns(wt.WeftFallbackWarning, match=r"aten\.atan\.default x1"), torch.no_grad():
        got = torch.compile(model, backend=wt.backend)(x)
    assert_inference_close(got.numpy(), reference(model, x)[0])


def test_fallback_error_raises_naming_the_op():
    model = Block(with_atan=True).eval()
    x = torch.randn(2, 5, 16)
    with pytest.raises(Exception, match=r"aten\.atan\.default") as caught, torch.no_grad():
        torch.compile(model, backend=wt.backend, options={"fallback": "error"})(x)
    chain, problem = [], caught.value
    while problem is not None:
        chain.append(problem)
        problem = problem.__cause__ or problem.__context__
    assert any(isinstance(p, wt.FallbackError) for p in chain)


def test_explain_prints_partitions_fallbacks_and_fused_regions(capsys):
    model = Block(with_atan=True).eval()
    reports = wt.explain(model, torch.randn(2, 5, 16))
    text = capsys.readouterr().out
    assert "partition weft_partition_" in text
    assert "aten.atan.default x1: no lowering" in text
    assert "fused region:" in text
    assert reports and reports[0].fallbacks == {"aten.atan.default": 1}


class DepthwiseNet(torch.nn.Module):
    """A MobileNet-style stack: stem, depthwise (groups = channels), grouped pointwise, a 1-D
    depthwise conv over the flattened rows; optionally a transposed conv (no Weft lowering)."""

    def __init__(self, with_transposed=False):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding="same", groups=8)
        self.pointwise = torch.nn.Conv2d(8, 12, 1, groups=4)
        self.temporal = torch.nn.Conv1d(12, 12, 5, padding=2, groups=12)
        self.up = torch.nn.ConvTranspose2d(12, 4, 2, stride=2) if with_transposed else None

    def forward(self, x):
        h = torch.relu(self.pointwise(torch.relu(self.depthwise(self.stem(x)))))
        if self.up is not None:
            return self.up(h)
        n, c, height, width = h.shape
        return self.temporal(h.reshape(n, c, height * width))


def test_grouped_depthwise_and_1d_convolutions_lower_with_no_fallback():
    torch.manual_seed(0)
    model = DepthwiseNet().eval()
    x = torch.randn(2, 3, 9, 10)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", wt.WeftFallbackWarning)
        got = torch.compile(model, backend=wt.backend)(x)
    assert_inference_close(got.numpy(), reference(model, x)[0], context="depthwise net")
    unbatched = x[0]
    dynamo.reset()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", wt.WeftFallbackWarning)
        stem = torch.compile(model.stem, backend=wt.backend)(unbatched)  # (C, H, W) input
    assert_inference_close(stem.numpy(), reference(model.stem, unbatched)[0], context="unbatched conv")


class NormNet(torch.nn.Module):
    """A small CNN as users write one: BatchNorm (eval), GroupNorm, ReLU6, hardswish, clamp and
    F.normalize (each fell back to eager before: the norms are whole ops in ATen's core set)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.gn = torch.nn.GroupNorm(2, 8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        h = torch.nn.functional.relu6(self.bn(self.conv(x)))  # (make_fx traces batch norm otherwise: tested here)
        h = torch.nn.functional.hardswish(self.gn(h)) + torch.clamp(h, min=0.5)
        pooled = h.mean(dim=(2, 3))
        return torch.nn.functional.normalize(self.head(pooled), dim=-1).clamp(-0.9, 0.9)


def test_batch_norm_group_norm_clamp_and_normalize_lower_with_no_fallback():
    torch.manual_seed(0)
    model = NormNet().eval()
    with torch.no_grad():  # running statistics away from 0 and 1, so eval's normalisation is exercised
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
        model.bn.weight.uniform_(0.5, 1.5)
        model.bn.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 3, 9, 10)
    for contract in ("inference", "strict"):
        dynamo.reset()
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("error", wt.WeftFallbackWarning)
            got = torch.compile(model, backend=wt.backend, options={"contract": contract})(x)
        assert_inference_close(got.numpy(), reference(model, x)[0], context=f"norm net {contract}")


def test_transposed_convolution_is_a_reported_fallback_with_the_right_answer():
    torch.manual_seed(0)
    model = DepthwiseNet(with_transposed=True).eval()
    x = torch.randn(1, 3, 6, 6)
    with pytest.warns(wt.WeftFallbackWarning, match=r"aten\.convolution\.default x1 \(transposed"), torch.no_grad():
        got = torch.compile(model, backend=wt.backend)(x)
    assert_inference_close(got.numpy(), reference(model, x)[0], context="transposed conv")


def test_dynamic_sequence_length_compiles_one_graph_and_one_plan_per_bucket():
    model = Block().eval()
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting, dynamic=True)
    with torch.no_grad():
        for length in (5, 9, 5, 9, 5):
            x = torch.randn(2, length, 16)
            assert_inference_close(compiled(x).numpy(), reference(model, x)[0])
    assert len(counting.compiled) == 1  # dynamo compiled once, with a symbolic length
    assert counting.plan_compiles() == 1  # 5 and 9 pad to the bucket 16: one Weft compile for both
    exact = CountingBackend()
    dynamo.reset()
    compiled = torch.compile(model, backend=exact, dynamic=True, options={"dynamic": "exact"})
    with torch.no_grad():
        for length in (5, 9, 5):
            x = torch.randn(2, length, 16)
            assert_inference_close(compiled(x).numpy(), reference(model, x)[0])
    assert exact.plan_compiles() == 2  # one plan per distinct length; a returning length reuses its own


def test_default_dynamic_recompiles_dynamo_at_most_once_for_many_lengths():
    model = Block().eval()
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting)
    with torch.no_grad():
        for length in (4, 6, 7, 6):
            compiled(torch.randn(1, length, 16))
    assert len(counting.compiled) <= 2  # static first graph, then one symbolic graph for every other length
    assert counting.plan_compiles() == 2  # length 4 (static graph); 6 and 7 share the symbolic graph's bucket


def test_training_forward_through_weft_backward_in_eager_gives_eager_gradients():
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(2, 4, 16)
    compiled = torch.compile(model, backend=wt.backend)
    compiled(x).square().sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().sum().backward()
    for mine, theirs in zip(got, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-4)


def test_parameters_bound_once_still_see_in_place_updates():
    model = Block().eval()
    compiled = torch.compile(model, backend=wt.backend)
    with torch.no_grad():
        first = torch.randn(2, 5, 16)
        compiled(first)
        model.up.weight.mul_(2.0)  # in place: the bound view aliases the parameter's storage
        second = torch.randn(2, 5, 16)
        got = compiled(second)
    assert_inference_close(got.numpy(), reference(model, second)[0])


class Scaled(torch.nn.Module):
    """A Python float attribute: under dynamic=True dynamo passes it as a 0-d float64 tensor."""

    def __init__(self, scaling):
        super().__init__()
        self.scaling = scaling

    def forward(self, x):
        return torch.cos(x) * self.scaling + torch.sin(x)


def test_dynamo_float_scalars_enter_the_plan_as_float32_with_no_fallback():
    model = Scaled(0.1 + 2.0**-40)  # not a float32: the cast to float32 rounds it, in Weft as in eager
    x = torch.randn(3, 7) * 100
    with Recorder() as reports, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", wt.WeftFallbackWarning)
        got = torch.compile(model, backend=wt.backend, dynamic=True)(x)
        want = model(x)
    assert {op for report in reports for op in report.fallbacks} == set()
    ops = {op for report in reports for partition in report.partitions for op in partition.ops}
    assert "prims.convert_element_type.default" in ops or "aten._to_copy.default" in ops, ops
    assert_inference_close(got.numpy(), want.double().numpy(), context="scaled cos/sin")




def test_a_compiled_call_leaves_the_openmp_thread_count_as_it_found_it():
    """The OpenMP runtime is shared with PyTorch: a plan run at threads=n must restore the
    caller's count, or torch's own ops change speed and dynamo recompiles on the next call
    (its guard on the global num_threads)."""
    model = Block().eval()
    before = torch.get_num_threads()
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting, dynamic=True, options={"threads": before + 1})
    with torch.no_grad():
        for length in (5, 9):
            x = torch.randn(2, length, 16)
            assert_inference_close(compiled(x).numpy(), reference(model, x)[0])
            assert torch.get_num_threads() == before
    assert len(counting.compiled) == 1  # no recompile from a changed thread count


def test_batch_norm_1d_without_affine_lowers_with_no_fallback():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.BatchNorm1d(4, affine=False)).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(5, 6)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", wt.WeftFallbackWarning)
        got = torch.compile(model, backend=wt.backend)(x)
    assert_inference_close(got.numpy(), reference(model, x)[0], context="batch norm 1d")


MASK = torch.tensor([[True, False, True, True, False], [False] * 5, [True] * 5, [True, True, False, True, True],
                     [False, True, True, True, True]])  # row 1: every key masked (eager's gradient is 0 there)


@pytest.mark.parametrize("kind", ["plain", "causal", "bool_mask", "gqa"])
def test_training_through_sdpa_gives_eager_gradients(kind):
    """aot_autograd traces SDPA as ``_scaled_dot_product_flash_attention_for_cpu`` and keeps its
    backward op; PyTorch's core decomposition of the forward returns the attention probabilities
    where the backward reads the log-sum-exp, so the gradients came out wrong (the loss was right).
    The backend's own decomposition (``weft.torch.decompose``) returns the real log-sum-exp."""
    torch.manual_seed(0)
    heads = 1 if kind == "gqa" else 3
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, heads, 5, 4), torch.randn(2, heads, 5, 4)
    weights = torch.linspace(-1, 1, 2 * 3 * 5 * 4).reshape(2, 3, 5, 4)
    keywords = {"plain": {}, "causal": {"is_causal": True}, "bool_mask": {"attn_mask": MASK},
                "gqa": {"is_causal": True, "enable_gqa": True}}[kind]

    def gradients(function):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = function(*leaves)
        (out * weights).sum().backward()
        return out.detach(), [t.grad for t in leaves]

    def attention(a, b, c):
        return torch.nn.functional.scaled_dot_product_attention(a, b, c, **keywords)

    with warnings.catch_warnings():
        warnings.simplefilter("error", wt.WeftFallbackWarning)
        got, got_grads = gradients(torch.compile(attention, backend=wt.backend))
    want, want_grads = gradients(attention)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for mine, theirs in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)


def test_max_min_with_indices_and_argmax_lower_with_no_fallback():
    """``torch.max(x, dim)`` (values and indices), ``min``, ``argmax``/``argmin``: each was a
    reported fallback. Ties give the first index and a NaN is the maximum (its first index), as
    ATen's; the compiled C, both contracts."""
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 3.0, nan], [2.0, 2.0, 1.0, 2.0], [float("-inf")] * 4, [0.5, -1.0, 0.5, 5.0]])
    logits = torch.randn(3, 5, 7)

    def heads(a, b):
        top, where = torch.max(a, 1)
        low = torch.min(b, -1, keepdim=True)
        return top, where, low.values, low.indices, a.argmax(0), b.argmin(), b.softmax(-1).argmax(-1)

    want = heads(x, logits)
    for contract in ("inference", "strict"):
        dynamo.reset()
        with torch.no_grad():
            got = torch.compile(heads, backend=wt.backend, options={"contract": contract, "fallback": "error"})(x, logits)
        for mine, theirs in zip(got, want, strict=True):
            assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
            torch.testing.assert_close(mine, theirs, equal_nan=True, rtol=0, atol=0)


def test_cnn_with_pools_and_leaky_relu_trains_with_eager_gradients_and_no_fallback():
    """max pool (its indices feed the eager backward), avg pool and leaky ReLU were fallbacks."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.LeakyReLU(0.1),
                              torch.nn.MaxPool2d(3, 2, 1), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
                              torch.nn.Linear(16, 2))
    twin = copy.deepcopy(net)
    x = torch.randn(2, 3, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", wt.WeftFallbackWarning)
        got = torch.compile(net, backend=wt.backend)(x)
    got.square().sum().backward()
    want = twin(x)
    want.square().sum().backward()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for mine, theirs in zip(net.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5)


def test_log1p_expm1_gathers_rounding_and_pow_lower_with_no_fallback_under_both_contracts():
    """Each was a reported fallback: log1p (softplus, mish, BCE with logits), expm1 (ELU, SELU,
    CELU), index_select (roll), repeat, flip, sign, round/floor, isnan, pow with a tensor
    exponent or a number base, bool xor, fmod and addmm with alpha/beta. Compiled C, both
    contracts: Inference within the rule of float64 eager, Strict byte-identical to the oracle
    (the harness runs the same ATen graph's plan through weft.oracle); tiny arguments of
    log1p/expm1 keep their digits in the compiled code too."""
    from aten_harness import run_lowered

    from weft.testing import assert_strict_equal

    index = torch.tensor([3, 0, 0, 6])

    def heads(x, t, w, c):
        smooth = torch.nn.functional.softplus(x) + torch.nn.functional.mish(x) + torch.log1p(x.abs())
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x, t)
        bent = torch.nn.functional.elu(x) + torch.nn.functional.selu(x) + torch.expm1(x * 1e-6) * 1e6
        moved = torch.index_select(x, 1, index) + torch.roll(x, 2, 1)[:, :4] + x.repeat(1, 2)[:, 3:7]
        moved = moved + torch.flip(x, (0, 1))[:, :4]
        steps = torch.sign(x) * torch.round(x * 3) + torch.floor(x) + torch.isnan(x).float()
        powers = torch.pow(x.abs() + 0.5, t) + torch.pow(2.0, x) + (x.abs() + 0.1) ** 1.7 + torch.fmod(x, 0.75)
        flags = (x > 0) ^ (t > 0.5)
        mixed = torch.addmm(c, x, w, beta=0.5, alpha=-2.0)
        return smooth, loss, bent, moved, steps, powers, flags, mixed, torch.log1p(x * 1e-7) * 1e7

    torch.manual_seed(0)
    x, t = torch.randn(5, 7) * 2, torch.rand(5, 7)
    w, c = torch.randn(7, 3), torch.randn(5, 3)
    inputs = (x, t, w, c)
    want = heads(*(a.double() for a in inputs))
    _, oracle = run_lowered(heads, *inputs)
    for contract in ("inference", "strict"):
        dynamo.reset()
        with torch.no_grad():
            got = torch.compile(heads, backend=wt.backend, options={"contract": contract, "fallback": "error"})(*inputs)
        for mine, theirs in zip(got, want, strict=True):
            if theirs.dtype == torch.bool:
                assert torch.equal(mine, theirs)
            else:
                assert_inference_close(mine.numpy(), theirs.numpy(), context=contract)
        if contract == "strict":
            assert_strict_equal(tuple(g.numpy() for g in got), oracle)


def test_index_map_and_constant_results_are_plan_outputs_under_both_contracts():
    """``flip`` and ``repeat`` are index maps and ``isnan`` of an integer tensor a constant (no
    member of their own); as a partition's outputs they still come back, exact, with ATen's dtypes."""
    def heads(a, i):
        return torch.isnan(i), torch.flip(a, (1,)), a.repeat(2, 1), torch.sign(i), torch.floor(i)

    a, i = torch.randn(3, 4), torch.randint(-5, 5, (3, 4))
    want = heads(a, i)
    for contract in ("inference", "strict"):
        dynamo.reset()
        with torch.no_grad():
            got = torch.compile(heads, backend=wt.backend, options={"contract": contract, "fallback": "error"})(a, i)
        for mine, theirs in zip(got, want, strict=True):
            assert mine.dtype == theirs.dtype and torch.equal(mine, theirs)


class TrainNet(torch.nn.Module):
    """conv + BatchNorm2d + ReLU, then BatchNorm1d on the pooled features: batch norm in train()."""

    def __init__(self, momentum=0.1, affine=True, track=True):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(6, momentum=momentum, affine=affine, track_running_stats=track)
        self.head = torch.nn.Linear(6, 4, bias=False)  # (a bias before a batch norm has no gradient but noise)
        self.bn1 = torch.nn.BatchNorm1d(4, momentum=momentum, affine=affine, track_running_stats=track)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        return self.bn1(self.head(h.mean(dim=(2, 3))))


def _train_steps_match_eager(model, make_input, contract, steps=2, no_grad=False, lowered=()):
    """Run ``steps`` compiled steps (fallbacks as errors) beside an eager copy: the outputs, the
    parameters' and the input's gradients, and every buffer (running statistics, num_batches_tracked)
    after each step; each op in ``lowered`` is in a Weft partition."""
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend=wt.backend, options={"fallback": "error", "contract": contract})
    with Recorder() as reports:
        _steps(model, eager, compiled, make_input, steps, no_grad)
    ops = {op for report in reports for partition in report.partitions for op in partition.ops}
    assert set(lowered) <= ops, sorted(ops)


def _steps(model, eager, compiled, make_input, steps, no_grad):
    for step in range(steps):
        x = make_input(step)
        mine, theirs = x.clone().requires_grad_(not no_grad), x.clone().requires_grad_(not no_grad)
        model.zero_grad()
        eager.zero_grad()
        if no_grad:
            with torch.no_grad():
                got, want = compiled(mine), eager(theirs)
        else:
            got, want = compiled(mine), eager(theirs)
            probe = torch.randn(got.shape, generator=torch.Generator().manual_seed(step))  # a loss no norm makes constant
            ((got + got.square()) * probe).sum().backward()
            ((want + want.square()) * probe).sum().backward()
            torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-4)
            for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=f"{name} grad, step {step}")
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        for (name, b), r in zip(model.named_buffers(), eager.buffers(), strict=True):
            torch.testing.assert_close(b, r, rtol=1e-5, atol=1e-6, msg=f"buffer {name}, step {step}")


@pytest.mark.parametrize("contract", ["inference", "strict"])
def test_batch_norm_in_train_mode_lowers_with_eager_gradients_and_running_statistics(contract):
    """``_native_batch_norm_legit_functional``: the batch's statistics (biased variance), the
    saved mean and rstd the eager backward reads, and the running statistics aot_autograd copies
    back into the buffers (unbiased variance, momentum 0.1), two steps."""
    torch.manual_seed(0)
    model = TrainNet().train()
    _train_steps_match_eager(model, lambda step: torch.randn(5, 3, 6, 7) * (step + 1) + step, contract,
                             lowered=["aten._native_batch_norm_legit_functional.default"])
    assert int(model.bn.num_batches_tracked) == 2


@pytest.mark.parametrize("options", [{"momentum": 0.3, "affine": False}, {"track": False}])
def test_batch_norm_train_variants_lower(options):
    """No affine with another momentum; ``track_running_stats=False`` (``_native_batch_norm_legit.no_stats``,
    the batch's statistics in train() and eval() alike)."""
    torch.manual_seed(1)
    model = TrainNet(**options).train()
    lowered = ["aten._native_batch_norm_legit_functional.default" if options.get("track", True) else "aten._native_batch_norm_legit.no_stats"]
    _train_steps_match_eager(model, lambda step: torch.randn(3, 3, 4, 5) + step, "inference", lowered=lowered)
    if not options.get("track", True):
        dynamo.reset()
        _train_steps_match_eager(model.eval(), lambda step: torch.randn(3, 3, 4, 5) - step, "inference", steps=1)


def test_batch_norm_train_under_no_grad_still_updates_the_running_statistics():
    torch.manual_seed(2)
    model = TrainNet().train()
    _train_steps_match_eager(model, lambda step: torch.randn(4, 3, 5, 5) * 2, "strict", no_grad=True,
                             lowered=["aten._native_batch_norm_legit_functional.default"])


def test_batch_norm_with_cumulative_momentum_matches_eager():
    """``momentum=None`` (a cumulative average over num_batches_tracked): nn.BatchNorm reads
    ``float(num_batches_tracked)``, a graph break, so dynamo runs the norm itself in eager (no
    graph reaches the backend for it); the compiled model still matches eager, conv through Weft."""
    torch.manual_seed(3)
    model = TrainNet(momentum=None).train()
    _train_steps_match_eager(model, lambda step: torch.randn(4, 3, 5, 5) + step, "inference", steps=3,
                             lowered=["aten.convolution.default"])


def test_batch_norm_in_train_mode_with_one_value_per_channel_raises_as_eager():
    """PyTorch raises for a single value per channel in training; so does the compiled model
    (dynamo runs the same check while tracing): no graph, no answer."""
    model = torch.nn.BatchNorm1d(4).train()
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        model(torch.randn(1, 4))
    with pytest.raises(Exception, match="more than 1 value per channel"):
        torch.compile(copy.deepcopy(model), backend=wt.backend, options={"fallback": "error"})(torch.randn(1, 4))


@pytest.mark.parametrize("contract", ["inference", "strict"])
@pytest.mark.parametrize("options", [{}, {"affine": True}, {"affine": True, "track_running_stats": True}])
def test_instance_norm_lowers_with_eager_gradients(contract, options):
    """InstanceNorm2d (and 1d): ATen's core decomposition views (N, C, H, W) as (1, N*C, H, W)
    through ``_native_batch_norm_legit.no_stats`` (or the functional op with running statistics,
    averaged over the batch and written back by ``copy``)."""
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.InstanceNorm2d(3, **options), torch.nn.ReLU())
    lowered = ["aten._native_batch_norm_legit_functional.default", "aten.copy.default"] if options.get("track_running_stats") else ["aten._native_batch_norm_legit.no_stats"]
    _train_steps_match_eager(model, lambda step: torch.randn(2, 2, 6, 5) * 2 + step, contract, lowered=lowered)
    if options.get("track_running_stats"):  # eval() normalises by the running statistics
        dynamo.reset()
        _train_steps_match_eager(model.eval(), lambda step: torch.randn(2, 2, 6, 5), contract, steps=1)
    dynamo.reset()
    one_d = torch.nn.Sequential(torch.nn.Conv1d(2, 3, 3), torch.nn.InstanceNorm1d(3, **options))
    _train_steps_match_eager(one_d, lambda step: torch.randn(2, 2, 9) - step, contract, lowered=lowered)


class CumsumNet(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(self.proj(x), self.dim).tanh()


@pytest.mark.parametrize("contract", ["inference", "strict"])
def test_cumsum_lowers_with_eager_gradients(contract):
    torch.manual_seed(5)
    _train_steps_match_eager(CumsumNet(1), lambda step: torch.randn(2, 9, 8), contract, steps=1,
                             lowered=["aten.cumsum.default"])
    dynamo.reset()
    _train_steps_match_eager(CumsumNet(-1), lambda step: torch.randn(3, 8), contract, steps=1)


def test_long_cumsum_is_a_reported_fallback_with_the_right_answer():
    """Past 1024 positions the O(n^2) masked sum is refused (Weft's IR has no scan): eager runs it."""
    torch.manual_seed(6)
    model = CumsumNet(1).eval()
    x = torch.randn(1, 1100, 8)
    with pytest.warns(wt.WeftFallbackWarning, match=r"aten\.cumsum\.default x1 \(cumsum along an axis of 1100"), \
            torch.no_grad():
        got = torch.compile(model, backend=wt.backend)(x)
    assert_inference_close(got.numpy(), reference(model, x)[0], context="long cumsum")
