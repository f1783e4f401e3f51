"""The machine profile: measured once, stored, reused, rebuilt when corrupted."""

import json
from dataclasses import replace

import pytest

from weft.cost import machine
from weft.cost.machine import MachineProfile, hardware_facts, machine_profile, profile_id, profile_path


@pytest.fixture(scope="module")
def quick_profile(tmp_path_factory):
    return machine_profile(tmp_path_factory.mktemp("cache"), quick=True)


def test_profile_has_positive_rates_and_units(quick_profile):
    profile = quick_profile
    assert profile.bandwidth(1) > 1e9  # any machine copies more than 1 GB/s
    assert profile.peak_flops(1) > 1e9
    assert profile.ridge_point(1) == pytest.approx(profile.peak_flops(1) / profile.bandwidth(1))
    assert profile.cpu_model and profile.logical_cpus >= 1
    assert profile.profile_id == profile_id(hardware_facts())


def test_rates_pick_the_largest_measured_thread_count():
    profile = MachineProfile(
        profile_id="x", cpu_model="m", cpu_flags=(), logical_cpus=4, vector_bits=256, l1d_bytes=1, l2_bytes=2,
        l3_bytes=3, copy_bandwidth_bytes_per_s=((1, 10.0), (4, 30.0)), numpy_copy_bandwidth_bytes_per_s=10.0,
        gemm_flops_per_s=((1, 100.0), (4, 400.0)), gemm_size=8, bandwidth_source="numpy",
        blas_threads_controlled=True, openblas_env=(), measured_at="now",
    )
    assert profile.bandwidth(1) == 10.0 and profile.bandwidth(2) == 10.0 and profile.bandwidth(8) == 30.0
    assert profile.peak_flops(4) == 400.0
    assert profile.ridge_point(4) == pytest.approx(400.0 / 30.0)
    # a noisy multi-thread measurement below the one-thread rate never lowers the roof
    noisy = replace(profile, copy_bandwidth_bytes_per_s=((1, 10.0), (4, 5.0)))
    assert noisy.bandwidth(4) == 10.0
    assert MachineProfile.from_json(json.loads(json.dumps(profile.to_json()))) == profile


def test_profile_is_stored_and_reused(tmp_path, monkeypatch):
    first = machine_profile(tmp_path, quick=True)
    calls = []
    monkeypatch.setattr(machine, "calibrate", lambda **kw: calls.append(kw) or first)
    again = machine_profile(tmp_path, quick=True)
    assert again == first and calls == []
    machine_profile(tmp_path, quick=True, recalibrate=True)
    assert len(calls) == 1


def test_corrupted_profile_is_detected_rebuilt_and_warned(tmp_path, monkeypatch, quick_profile):
    path = profile_path(tmp_path, profile_id(hardware_facts()))
    path.parent.mkdir(parents=True)
    path.write_text("{ not json")
    monkeypatch.setattr(machine, "calibrate", lambda **kw: quick_profile)
    with pytest.warns(UserWarning, match="corrupted"):
        profile = machine_profile(tmp_path)
    assert profile == quick_profile
    assert json.loads(path.read_text())["profile_id"] == quick_profile.profile_id
    # a file whose fields were tampered with is also rebuilt
    data = json.loads(path.read_text())
    data["copy_bandwidth_bytes_per_s"] = [[1, -5.0]]
    path.write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="non-positive"):
        machine_profile(tmp_path)


def test_profile_measured_with_other_probe_code_is_measured_again(tmp_path, monkeypatch, quick_profile):
    """The exp/log rates are those of the math the probes compiled: a profile stored before
    that code changed (its probes digest differs, or it predates the digest) is measured again."""
    assert quick_profile.probes_digest == machine.probes_digest(quick_profile.lanes)
    path = profile_path(tmp_path, profile_id(hardware_facts()))
    path.parent.mkdir(parents=True)
    monkeypatch.setattr(machine, "calibrate", lambda **kw: quick_profile)
    stale = dict(quick_profile.to_json(), probes_digest="0" * 16)
    path.write_text(json.dumps(stale))
    with pytest.warns(UserWarning, match="other probe code"):
        assert machine_profile(tmp_path) == quick_profile
    older = quick_profile.to_json()
    del older["probes_digest"]
    path.write_text(json.dumps(older))
    with pytest.warns(UserWarning, match="probes_digest"):
        assert machine_profile(tmp_path) == quick_profile


def test_schema2_probe_facts_are_measured_and_ordered(quick_profile):
    profile = quick_profile
    """The probes ran through the one compiler path and gave physically ordered numbers."""
    assert 0.3e9 < profile.clock_hz < 8e9
    assert profile.line_bytes in (32, 64, 128, 256)
    assert profile.fma_flops_per_core > 1e9
    assert {kind for kind, _ in profile.unary_vectors_per_s} == {"exp", "log", "divide"}
    assert all(rate > 0 for _, rate in profile.unary_vectors_per_s)
    # each of exp, log and divide takes at least one FMA slot's time per vector: none runs faster
    # than the FMA peak in vectors (with room for noise). Their order among themselves is the
    # machine's: a divide is cheaper than an exp on Zen 4 but not on Emerald Rapids (AVX-512
    # vdivps: 249 M against exp's 254 M vectors/s measured), so it is not asserted.
    fma_vectors_per_s = profile.fma_flops_per_core / (2 * profile.lanes)
    assert all(rate < 1.5 * fma_vectors_per_s for _, rate in profile.unary_vectors_per_s)
    levels = {(level, kind, threads) for level, kind, threads, _ in profile.stream_bytes_per_s}
    assert ("l1", "read", 1) in levels and ("memory", "copy", 1) in levels
    # an L1-resident read is never slower than a read from memory (best of several runs each)
    assert profile.level_bandwidth("l1", "read", 1) > profile.level_bandwidth("memory", "read", 1)
    assert profile.parallel_region_s > 0 and profile.runner_call_s > 0 and profile.first_touch_s_per_page > 0


def test_level_bandwidth_falls_back_to_copy_bandwidth_without_probe_numbers():
    profile = MachineProfile(
        profile_id="x", cpu_model="m", cpu_flags=(), logical_cpus=2, vector_bits=512, l1d_bytes=1, l2_bytes=2,
        l3_bytes=3, copy_bandwidth_bytes_per_s=((1, 10.0),), numpy_copy_bandwidth_bytes_per_s=10.0,
        gemm_flops_per_s=((1, 100.0),), gemm_size=8, bandwidth_source="numpy",
        blas_threads_controlled=False, openblas_env=(), measured_at="now",
        stream_bytes_per_s=(("l1", "read", 1, 50.0), ("l1", "read", 2, 90.0)),
    )
    assert profile.level_bandwidth("memory", "read", 1) == 10.0
    assert profile.level_bandwidth("l1", "read", 1) == 50.0
    assert profile.level_bandwidth("l1", "read", 2) == 90.0
    assert profile.lanes == 16
