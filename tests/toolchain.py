"""What a test needs from the machine, and what happens when it is missing.

Outside CI a missing C compiler skips the tests that need one, with the reason printed
in pytest's summary (``-ra``). In CI (the ``CI`` environment variable set, as ``.ci/run``
and hosted runners do) a missing compiler is a failure: nothing may skip silently there.
"""

from __future__ import annotations

import os
import shutil

import pytest

from weft.config import config_from_env


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def need_c_compiler() -> str:
    """The C compiler's path; skip (fail in CI) when there is none."""
    command = config_from_env().cc
    path = shutil.which(command)
    if path is None:
        reason = f"no C compiler ({command!r} from WEFT_CC or cc) on PATH: the C side cannot be checked"
        if in_ci():
            pytest.fail(f"{reason}; in CI a missing compiler is a failure, not a skip", pytrace=False)
        pytest.skip(reason)
    return path
