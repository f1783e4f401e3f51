"""The C walk over float32 bit patterns (strided here; step 1 is the full walk in docs/math.md)."""

import shutil

import pytest

from weft.config import config_from_env
from weft.mathf.accuracy import STATED_MAX_ULP
from weft.mathf.exhaustive import REFERENCE_C, walk


@pytest.mark.skipif(shutil.which(config_from_env().cc) is None, reason="no C compiler (WEFT_CC / cc)")
def test_strided_walk_over_all_bit_patterns_within_bounds():
    rows = walk(step=4099, lanes=16)
    assert [row[0] for row in rows] == list(REFERENCE_C)
    for name, count, worst, worst_input in rows:
        assert count >= 2**32 // 4099
        assert worst <= STATED_MAX_ULP[name], (name, worst, worst_input)
