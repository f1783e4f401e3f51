"""Library bodies are priced on the same footing as the generic forms of their region: their
streams read and written at the levels the plan leaves them (``homes``)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "cost"))

from model_cases import READ, WRITE, fixed_profile  # noqa: E402

from weft.compose.regions import grow  # noqa: E402
from weft.config import config_from_env  # noqa: E402
from weft.cost.model import machine_numbers  # noqa: E402
from weft.decide.library.adam import LibraryMatch, price_adam  # noqa: E402
from weft.decide.verdicts import DecidedPricing  # noqa: E402
from weft.fuse import region_pricing  # noqa: E402
from weft.lower import Target  # noqa: E402
from weft.workloads import get_workload  # noqa: E402

CLOCK = 4e9


def test_adam_streams_come_from_their_homes():
    n = 1 << 20
    roles = tuple((role, role) for role in ("param", "grad", "m", "v", "new_param", "new_m", "new_v"))
    match = LibraryMatch("fused adam", roles, (), (n,), ("new_m", "new_v", "new_param"))
    numbers = machine_numbers(fixed_profile(), 1)
    in_memory = {name: 3 for _, name in roles}
    # the square root and the divide of each vector (2.5 cycles each) wait on the transfers
    # from beyond L1, as a generated nest's in-core work does (weft.cost.model.body_cycles)
    divides = n / 16 * 2 * 2.5
    expected = (4 * 4 * n / READ["memory"] + 3 * 4 * n / WRITE["memory"]) * CLOCK + divides
    assert price_adam(match, numbers, in_memory) == pytest.approx(expected)
    # without homes: where the whole set fits (28 MiB: memory; 14 MiB: the L3 share)
    assert price_adam(match, numbers) == pytest.approx(expected)
    half = LibraryMatch("fused adam", roles, (), (n // 2,), ("new_m", "new_v", "new_param"))
    assert price_adam(half, numbers) == pytest.approx((8 * n / READ["l3"] + 6 * n / WRITE["l3"]) * CLOCK + divides / 2)


def test_adam_body_is_never_priced_under_its_regions_lower_bound():
    """The priced_plans Adam (4 tensors of 500,000): the plan leaves p, g, m, v in memory, so
    no form of the step moves them faster than that; the body was priced from L3 (751k
    cycles against the generic form's 1.75M on this machine) and taken, 1.19x slower."""
    plan = get_workload("adam").plan(params=2_000_000, tensors=4)
    config = config_from_env(contract="inference", threads=1, fusion="priced", budget_s=60)
    pricing = region_pricing(plan, config, Target(16, "inference"), profile=fixed_profile())
    decided = DecidedPricing(pricing, None, {"contract": "inference", "threads": 1, "profile_id": "fixed",
                                              "deciding": "", "compiler": ""}, config.race_margin)
    anchor = plan.kernels[2].output
    region = next(r for r in grow(plan, anchor, frozenset(k.output for k in plan.kernels)).candidates
                  if len(r.members) == 3)
    body = decided.body_prices(region)["fused adam"]
    _, bound = pricing.pricer.estimate(pricing.region_lowering(region))
    assert body >= bound
