"""The fusion-opportunity signature on plans built by hand."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from handmade import attention_plan, layernorm_plan, matmul_plan  # noqa: E402

from weft.diagnose.chains import find_chains  # noqa: E402


def test_attention_is_one_chain_with_the_score_matrix():
    plan = attention_plan(64, 8)
    chains = find_chains(plan)
    assert len(chains) == 1
    chain = chains[0]
    assert chain.members == ("s", "m", "e", "l", "p", "o")
    assert chain.inputs == ("q", "k", "v") and chain.outputs == ("o",)
    assert chain.intermediate_bytes == 64 * 64 * 4 and chain.boundary_bytes == 64 * 8 * 4
    assert chain.strictly_larger
    # unfused: s (written, read by m and e), e (written, read by l and p), p (written, read by o)
    assert chain.avoidable_bytes >= 8 * 64 * 64 * 4
    # mark 3 is judged on the elementwise and reduction steps, not the two contractions
    assert chain.step_members == ("m", "e", "l", "p")
    assert chain.steps.intensity < chain.unfused.intensity
    assert chain.holds(chain.steps.intensity * 1.5) and not chain.holds(chain.steps.intensity * 0.5)


def test_naive_layernorm_chain_absorbs_its_row_statistics():
    chains = find_chains(layernorm_plan(16, 32))
    assert len(chains) == 1
    assert chains[0].members == ("mean", "xc", "var", "rstd", "y")
    assert chains[0].large_intermediate and not chains[0].strictly_larger


def test_a_single_matmul_is_no_chain():
    assert find_chains(matmul_plan(16)) == []
