"""Symbolic lengths padded into buckets (weft/torch/buckets.py): one Weft compile per bucket,
eager's answers at the real length, and an exact per-length fallback, with its reason, for a
graph that padding would change."""

import warnings

import pytest

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")

from backend_counting import CountingBackend, Recorder  # noqa: E402

import weft.torch as wt  # noqa: E402
from weft.testing import assert_inference_close  # noqa: E402
from weft.torch.buckets import MINIMUM_BUCKET, bucket_of  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dynamo():
    dynamo.reset()
    yield
    dynamo.reset()


class Pooled(torch.nn.Module):
    """Causal attention over the sequence (softmax over keys, P x V), a layer norm, a mean
    over tokens, a log-softmax over tokens and a sum over tokens of log|x| (-inf at a zero
    pad: only a select, never a multiply by 0, keeps it out)."""

    def __init__(self, dim=16):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.norm = torch.nn.LayerNorm(dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        length = x.shape[1]
        causal = torch.arange(length)[:, None] >= torch.arange(length)[None, :]
        scores = (q @ k.transpose(-1, -2) / 4.0).masked_fill(~causal, float("-inf"))
        h = self.norm(x + torch.softmax(scores, -1) @ v)
        return self.out(h), h.mean(1), torch.log_softmax(h.sum(-1), -1), x.abs().log().sum(1)


class Differences(torch.nn.Module):
    """Neighbouring differences along the sequence: a slice with an offset along a padded axis."""

    def forward(self, x):
        return torch.tanh(x[:, 1:] - x[:, :-1]).sum(1)


class Doubled(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(torch.cat([x, 2 * x], 1), 1)


def _check(model, compiled, x):
    want = [t.double() for t in model.double()(x.double())]
    model.float()
    got = compiled(x)
    for number, (mine, theirs) in enumerate(zip(got, want, strict=True)):
        assert mine.shape == theirs.shape and mine.dtype == torch.float32 and mine.is_contiguous()
        assert_inference_close(mine.numpy(), theirs.numpy(), context=f"output {number}, length {x.shape[1]}")


def test_bucket_is_the_next_power_of_two_at_least_the_minimum_within_the_upper_bound():
    assert [bucket_of(n) for n in (1, 5, 16, 17, 100, 128, 129)] == [16, 16, 16, 32, 128, 128, 256]
    assert MINIMUM_BUCKET == 16
    assert bucket_of(300, upper=512) == 512 and bucket_of(300, upper=400) == 400


def test_lengths_of_one_bucket_share_one_plan_and_give_eager_answers():
    torch.manual_seed(0)
    model = Pooled().eval()
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting, dynamic=True)
    with torch.no_grad(), Recorder() as reports, warnings.catch_warnings():
        warnings.simplefilter("error", wt.WeftDynamicShapeWarning)
        warnings.simplefilter("error", wt.WeftFallbackWarning)
        for length in (5, 9, 12, 9):
            _check(model, compiled, torch.randn(3, length, 16))
        assert len(counting.compiled) == 1
        assert counting.plan_compiles() == 1  # 5, 9 and 12 all pad to 16
        _check(model, compiled, torch.randn(3, 20, 16))  # bucket 32: one more compile
        assert counting.plan_compiles() == 2
        _check(model, compiled, torch.randn(3, 31, 16))
    assert counting.plan_compiles() == 2
    (first, second) = reports
    assert "s" in first.dynamic and "in bucket 16" in first.dynamic and "in bucket 32" in second.dynamic
    for op in ("aten._softmax.default", "aten._log_softmax.default", "aten.bmm.default", "aten.sum.dim_IntList",
               "aten.mean.dim (divided by the real count)"):
        assert op in first.dynamic, (op, first.dynamic)


def test_a_length_equal_to_its_bucket_needs_no_padding_and_uses_the_same_plan():
    torch.manual_seed(1)
    model = Pooled().eval()
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting, dynamic=True)
    with torch.no_grad():
        _check(model, compiled, torch.randn(2, 32, 16))  # not 16: dynamo would give it the width's symbol
        _check(model, compiled, torch.randn(2, 23, 16))
    assert counting.plan_compiles() == 1


def test_default_dynamic_pads_the_automatic_dynamic_graph():
    torch.manual_seed(2)
    model = Pooled().eval()
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting)  # static first graph, then a symbolic one
    with torch.no_grad():
        for length in (4, 6, 11, 13):
            _check(model, compiled, torch.randn(2, length, 16))
    assert len(counting.compiled) == 2
    assert counting.plan_compiles() == 2  # length 4 (static graph); 6, 11, 13 (one bucket of the symbolic one)


@pytest.mark.parametrize("model, reason", [(Differences(), r"extent"), (Doubled(), r"cat along a padded axis")])
def test_a_graph_padding_would_change_falls_back_to_exact_lengths_and_says_why(model, reason):
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting, dynamic=True)
    with torch.no_grad(), Recorder() as reports:
        with pytest.warns(wt.WeftDynamicShapeWarning, match=reason):
            for length in (5, 9, 5):
                x = torch.randn(2, length, 8)
                assert_inference_close(compiled(x).numpy(), model(x.double()).numpy())
    assert counting.plan_compiles() == 2  # one per distinct length
    assert all(report.dynamic.startswith("exact per length:") for report in reports)
    assert reason.split()[0] in reports[0].dynamic


def test_explain_states_the_bucket_or_the_reason(capsys):
    wt.explain(Doubled(), torch.randn(2, 5, 8), options={"dynamic": "buckets"})
    assert "dynamic" not in capsys.readouterr().out  # a static graph: no symbolic sizes
    dynamo.reset()
    with Recorder() as reports, torch.no_grad():
        torch.compile(Pooled().eval(), backend=wt.backend, dynamic=True)(torch.randn(2, 5, 16))
    text = wt.format_reports(reports)
    assert "dynamic shapes: buckets:" in text and "in bucket 16" in text


def test_dynamic_exact_option_compiles_per_length():
    model = Pooled().eval()
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting, dynamic=True, options={"dynamic": "exact"})
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", wt.WeftDynamicShapeWarning)  # asked for: no warning
        for length in (5, 9):
            _check(model, compiled, torch.randn(2, length, 16))
    assert counting.plan_compiles() == 2
    with pytest.raises(wt.graph.WeftError, match="dynamic"):
        wt.backend(torch.fx.symbolic_trace(model), [torch.randn(2, 5, 16)], options={"dynamic": "padded"})


class Gathered(torch.nn.Module):
    """Token ids and positions through embeddings: ids pad with 0, positions (an arange past
    the table's real rows at padded places) are masked to 0 before the gather."""

    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(50, 8)
        self.positions = torch.nn.Embedding(20, 8)

    def forward(self, ids):
        places = torch.arange(ids.shape[1])
        return (self.tokens(ids) + self.positions(places)).amax(1)


def test_gathered_indices_stay_in_bounds_at_padded_positions():
    torch.manual_seed(3)
    model = Gathered().eval()
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting, dynamic=True)
    with torch.no_grad():
        for length in (17, 19):  # bucket 32 would read position rows 20..31 of a 20-row table
            ids = torch.randint(0, 50, (2, length))
            assert_inference_close(compiled(ids).numpy(), model(ids).numpy())
    assert counting.plan_compiles() == 1


class NotSixteen(torch.nn.Module):
    """A Python branch on the length: dynamo guards ``length != 16``, which the bucket 16 breaks."""

    def forward(self, x):
        y = torch.tanh(x)
        if x.shape[1] != 16:
            y = y + 1.0
        return y.sum(1)


def test_a_bucket_that_breaks_a_guard_dynamo_took_runs_at_the_exact_length():
    model = NotSixteen()
    counting = CountingBackend()
    compiled = torch.compile(model, backend=counting, dynamic=True)
    with torch.no_grad(), Recorder() as reports:
        for length in (5, 9, 40, 50):
            x = torch.randn(3, length, 8)
            assert_inference_close(compiled(x).numpy(), model(x.double()).numpy())
    assert len(counting.compiled) == 1
    assert counting.plan_compiles() == 3  # 5 and 9 exact (their bucket 16 breaks the guard); 40 and 50 in 64
    assert [r.dynamic.split(":")[0] for r in reports] == ["exact per length", "exact per length", "buckets"]
    assert "break a guard" in reports[0].dynamic
