"""End-to-end benchmark runs on a hand-built attention plan (no timing assertions
beyond the verdict of an arm that does three times the work)."""

import json

import numpy as np
import pytest
from plans import attention
from plans.workloads import HandAttention

from weft.bench.arms import BenchError, Runner, parse_arm, parse_arms
from weft.bench.parity import check_parity
from weft.bench.result import load_result, recompute, save_result
from weft.bench.run import BenchOptions, run_bench
from weft.cost.machine import machine_profile
from weft.workloads.params import parse_params


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    return machine_profile(tmp_path_factory.mktemp("cache"), quick=True)


def quick(arms, **kw):
    return BenchOptions(arms=arms, blocks=16, warmup=1, target_round_s=0.01, **kw)


def verdicts_match_their_rounds(result) -> list[dict]:
    """The verdicts a run reports, checked against the verdict rule recomputed from its
    own raw rounds: whatever the machine did, a failed control is reported as failed
    (never measured again until it passes), and nothing here asserts on timing."""
    rows = recompute(result)
    assert rows and all(agree for *_, agree in rows), [(name, stored) for name, _, stored, agree in rows if not agree]
    return result["in_process"]["verdicts"]


def test_arm_grammar():
    spec = parse_arm("greedy+inference@2")
    assert (spec.name, spec.fusion, spec.contract, spec.threads) == ("greedy", "greedy", "inference", 2)
    assert parse_arm("unfused", default_threads=3).threads == 3
    assert parse_arm("torch-eager").kind == "peer"
    with pytest.raises(BenchError, match="unknown arm"):
        parse_arm("fastest")
    with pytest.raises(BenchError, match="test-only"):
        parse_arm("slowed")
    with pytest.raises(BenchError, match="positive integer"):
        parse_arm("unfused@0")
    with pytest.raises(BenchError, match="twice"):
        parse_arms("unfused,unfused")
    assert parse_params(["tokens=2048", "eps=1e-5", "mode=x"]) == {"tokens": 2048, "eps": 1e-5, "mode": "x"}


def test_aa_run_reports_its_control_and_recomputes(profile, tmp_path):
    result = run_bench(HandAttention(), quick("unfused"), profile)
    section = result["in_process"]
    assert section["parity"]["reference"] == "oracle"
    (control,) = verdicts_match_their_rounds(result)
    assert control["candidate"] == "unfused:control" and control["status"] in ("pass", "fail", "inconclusive")
    assert len(section["blocks"]) == 16
    assert {tuple(b["order"]) for b in section["blocks"]} == {
        ("unfused", "unfused:control", "unfused:control", "unfused"),
        ("unfused:control", "unfused", "unfused", "unfused:control"),
    }
    path = save_result(result, tmp_path / "r.json")
    rows = recompute(load_result(path))
    assert rows and all(agree for *_, agree in rows)
    provenance = json.loads(path.read_text())["provenance"]
    for key in ("commit", "cpu_model", "cpu_features", "machine_profile_id", "arms"):
        assert key in provenance
    assert "flags" in provenance["arms"]["unfused"]


def test_slowed_arm_is_judged_from_its_rounds(profile):
    """The slowed arm does three times the work; its verdict is whatever the rule says of
    its rounds (checked by recomputation), and its paired ratio shows the extra work."""
    result = run_bench(HandAttention(), quick("unfused,slowed", allow_test_arms=True), profile)
    control, slowed = verdicts_match_their_rounds(result)
    assert slowed["candidate"] == "slowed"
    assert slowed["paired_median_ratio"] > 1.5, slowed  # 3x the work: far beyond any noise here
    assert slowed["status"] != "pass", slowed


def test_tampered_result_does_not_recompute_to_the_same_verdict(profile, tmp_path):
    options = BenchOptions(arms="unfused,slowed", blocks=3, target_round_s=0.002, allow_test_arms=True)
    result = run_bench(HandAttention(), options, profile)
    result["in_process"]["verdicts"][1]["status"] = "tampered"
    rows = recompute(result)
    assert not all(agree for *_, agree in rows)


def test_parity_uses_the_contract_tolerance_and_exact_non_finite_values():
    """Parity used 2e-3 against a 1e-4 contract, and an inf in the reference made the error 0."""
    reference = (np.array([1.0, np.inf, -np.inf, np.nan, 0.0], np.float32),)

    def inference(values):
        return Runner(parse_arm("inference"), lambda: None, (np.array(values, np.float32),))

    assert check_parity([inference([1.00001, np.inf, -np.inf, np.nan, 0.0])], reference, "oracle")[0].ok
    for wrong in ([1.001, np.inf, -np.inf, np.nan, 0.0],    # within 2e-3, outside 1e-4
                  [1.0, 3e38, -np.inf, np.nan, 0.0],        # a finite value where the reference has inf
                  [1.0, -np.inf, -np.inf, np.nan, 0.0],     # an infinity of the wrong sign
                  [1.0, np.inf, -np.inf, 0.0, 0.0],         # a number where the reference has NaN
                  [1.0, np.inf, -np.inf, np.nan, np.nan]):  # NaN where the reference has a number
        with pytest.raises(BenchError, match="parity failed"):
            check_parity([inference(wrong)], reference, "oracle")
    # Strict arms: the Strict rule (NaN anywhere it is NaN, any payload; -0.0 is not +0.0)
    payload = reference[0].copy()
    payload.view(np.uint32)[3] = 0xFFC00001
    strict = Runner(parse_arm("unfused"), lambda: None, (payload,))
    assert check_parity([strict], reference, "oracle")[0].ok
    negative_zero = reference[0].copy()
    negative_zero[4] = -0.0
    with pytest.raises(BenchError, match="parity failed"):
        check_parity([Runner(parse_arm("unfused"), lambda: None, (negative_zero,))], reference, "oracle")


def test_parity_failure_is_an_error():
    spec = parse_arm("unfused")
    good = Runner(spec, lambda: None, (np.ones(4, np.float32),))
    bad = Runner(parse_arm("inference"), lambda: None, (np.full(4, 1.1, np.float32),))
    with pytest.raises(BenchError, match="parity failed"):
        check_parity([good, bad], (np.ones(4, np.float32),), "oracle")
    near = Runner(parse_arm("inference"), lambda: None, (np.full(4, 1.0001, np.float32),))
    assert [c.ok for c in check_parity([good, near], (np.ones(4, np.float32),), "oracle")] == [True, True]
    off_by_one_bit = Runner(spec, lambda: None, (np.nextafter(np.ones(4, np.float32), 2),))
    with pytest.raises(BenchError):
        check_parity([off_by_one_bit], (np.ones(4, np.float32),), "oracle")


def test_stage_and_budget(profile):
    options = BenchOptions(arms="unfused,slowed", blocks=4, target_round_s=0.005, allow_test_arms=True, stage="m,e,l,p")
    result = run_bench(HandAttention(), options, profile)
    assert result["stage"] == ["m", "e", "l", "p"]
    assert result["in_process"]["members"] == ["m", "e", "l", "p"]
    assert result["whole"]["members"] == ["s", "m", "e", "l", "p", "o"]
    (row,) = result["budget"]
    assert row["predicted_whole_saving"] == pytest.approx(row["stage_saving_s"] * 1 / row["whole_plan_s"])
    assert row["stage_saving_s"] < 0  # the slowed arm costs time


def test_torch_peer_parity(profile):
    pytest.importorskip("torch", reason="PyTorch is not installed (optional peer; .ci/run installs it)")
    options = BenchOptions(arms="unfused,torch-sdpa,torch-eager", blocks=2, target_round_s=0.002)
    result = run_bench(HandAttention(), options, profile)
    checks = {c["label"]: c for c in result["in_process"]["parity"]["checks"]}
    assert checks["torch-sdpa"]["mode"] == "tolerance" and checks["torch-sdpa"]["ok"]
    assert checks["unfused"]["mode"] == "exact"
    assert result["provenance"]["torch"]
    assert set(result["in_process"]["roofline"]["arms"]) == {"unfused", "unfused:control", "torch-sdpa", "torch-eager"}


class NoTorchTwin(HandAttention):
    def torch_fn(self, tokens, dim):
        return None


def test_an_unavailable_peer_is_reported_not_silently_dropped(profile):
    options = BenchOptions(arms="unfused,torch-eager,slowed", blocks=2, target_round_s=0.002, allow_test_arms=True)
    result = run_bench(NoTorchTwin(), options, profile)
    section = result["in_process"]
    assert "no PyTorch equivalent" in section["unavailable"]["torch-eager"]
    assert section["candidates"] == ["slowed"]
    with pytest.raises(BenchError, match="no candidate arm can run"):
        run_bench(NoTorchTwin(), BenchOptions(arms="unfused,torch-eager", blocks=2, target_round_s=0.002), profile)


def test_stage_plan_cuts_the_region_out():
    from weft.bench.stage import resolve_members, stage_inputs, stage_plan
    from weft.ir import Role

    plan = attention(16, 4, 4)
    assert resolve_members(plan, "auto") == ("s", "m", "e", "l", "p", "o")
    assert resolve_members(plan, "p, e") == ("e", "p")  # plan order
    with pytest.raises(BenchError, match="unknown members"):
        resolve_members(plan, "e,zz")
    stage = stage_plan(plan, ("m", "e", "l"))
    assert stage.inputs == ("s",) and stage.outputs == ("e", "l")
    assert stage.buffer("s").role is Role.INPUT and stage.buffer("m").role is Role.INTERMEDIATE
    arrays = HandAttention().inputs(tokens=16, dim=4)
    (scores,) = stage_inputs(plan, stage, arrays)
    assert scores.shape == (16, 16) and scores.dtype == np.float32 and np.any(scores != 0)
