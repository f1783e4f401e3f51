"""The pricer's per-plan caches give what the uncached definitions give."""

import sys
from pathlib import Path

import pytest

from weft.compose.priced import survey_candidates
from weft.compose.signature import region_signature
from weft.config import config_from_env
from weft.cost.bridge import buffer_order
from weft.fuse import region_pricing
from weft.lower import Target
from weft.workloads import get_workload

sys.path.insert(0, str(Path(__file__).parent))
from model_cases import fixed_profile  # noqa: E402


@pytest.mark.parametrize("name, params", [("qwen-decode-step", {"layers": 2}), ("vit-block", {})])
def test_cached_signatures_and_buffer_orders_match_their_definitions(name, params, tmp_path):
    plan = get_workload(name).plan(**params)
    config = config_from_env(contract="inference", threads=1, fusion="priced", cache_dir=tmp_path)
    pricing = region_pricing(plan, config, Target(16, "inference"), profile=fixed_profile())
    regions = survey_candidates(plan)
    assert len(regions) > 5
    seen = set()
    for region in regions:
        # the definition: the digest of the region on its own sub-plan
        assert pricing.signature(region) == region_signature(pricing.subplan(region), region, "inference")
        assert pricing.buffer_order(region) == buffer_order(pricing.kernels, region)
        seen.add(pricing.signature(region))
    if name == "qwen-decode-step":
        assert len(seen) < len(regions)  # repeated layers share signatures: the cache is exercised
