"""The priced policy's survey prices what can be emitted fused, so repeated layers share it."""

import sys
from pathlib import Path

from weft.compose.priced import survey_candidates
from weft.config import config_from_env
from weft.fuse import region_pricing
from weft.lower import Target
from weft.workloads import get_workload

sys.path.insert(0, str(Path(__file__).parents[1] / "cost"))
from model_cases import fixed_profile  # noqa: E402

EXAMPLES = Path(__file__).parents[2] / "examples"


def _survey(layers: int, tmp_path):
    plan = get_workload(f"{EXAMPLES}/minilm6.py:build").plan(layers=layers)
    config = config_from_env(contract="strict", threads=1, fusion="priced", cache_dir=tmp_path)
    pricing = region_pricing(plan, config, Target(16, "strict"), profile=fixed_profile())
    return pricing, survey_candidates(plan, fits=pricing.fits)


def test_a_stack_of_encoder_layers_surveys_as_many_signatures_as_two_layers(tmp_path):
    """A post-norm encoder layer grows, over its batch axis, a candidate through all of its
    members and into the layer before; most of it cannot be emitted fused. Surveyed whole, it
    put each layer's anchors elsewhere, so no layer shared a signature with the next: six
    MiniLM layers held 164 signatures and the 1 s pricing share priced 45 of them."""
    two, regions_two = _survey(2, tmp_path)
    six, regions_six = _survey(6, tmp_path)
    signatures_two = {two.signature(region) for region in regions_two}
    signatures_six = {six.signature(region) for region in regions_six}
    assert len(regions_six) > 2 * len(regions_two)  # every layer is surveyed
    assert len(signatures_six) == len(signatures_two) < 20
    for region in regions_six:  # and only what the lowering or a library body can emit fused
        assert six.fits(region) is None
