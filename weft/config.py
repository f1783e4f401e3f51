"""The one explicit configuration that travels through a compile.

Environment variables are read here and nowhere else:
WEFT_CACHE_DIR, WEFT_THREADS, WEFT_CC, WEFT_BUDGET_S, WEFT_GENERIC_FUSION.

``WEFT_GENERIC_FUSION=off`` (docs/design.md section 6) turns the generic, priced engine
off: a compile that asks for ``fusion="priced"`` gets ``fusion="matchers"`` (a
matched pattern fuses on sight), for side-by-side comparison. Every other policy
is taken as asked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from weft.errors import ConfigError

CONTRACTS = ("strict", "inference")
FUSION_POLICIES = ("off", "greedy", "priced", "matchers")
# The one default fusion policy: weft.compile, the Weft arms without a policy
# (strict, inference) and ``weft explain`` all use it. "priced": a region is fused only
# where its price on this machine (and a race where the margin is thin) says it pays;
# "off" keeps every member its own function, "greedy" fuses on sight.
DEFAULT_FUSION = "priced"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "weft"


@dataclass(frozen=True, slots=True)
class Config:
    """How one compile runs: ``contract`` (strict | inference), OpenMP ``threads``, the
    ``fusion`` policy (off | greedy | priced | matchers), the artifact ``cache_dir``, the
    C compiler ``cc``, and ``budget_s``, the compile budget of ``fusion="priced"`` (the
    pricer may spend ``weft.fuse.PRICING_SHARE`` of it; other policies do not read it);
    ``race_margin`` and ``race_share``: a priced region whose predicted margin is thinner
    than ``race_margin`` is raced, the races spending at most ``race_share`` of ``budget_s``."""

    contract: str = "strict"
    threads: int = 1
    fusion: str = DEFAULT_FUSION
    cache_dir: Path = field(default_factory=default_cache_dir)
    cc: str = "cc"
    budget_s: float = 2.0
    race_margin: float = 0.10  # fusion="priced": race a region whose predicted margin is thinner than this
    race_share: float = 0.25  # the part of budget_s the races may spend (0: never race)

    def __post_init__(self) -> None:
        if self.contract not in CONTRACTS:
            raise ConfigError(f"contract={self.contract!r} is not one of {CONTRACTS}")
        if self.fusion not in FUSION_POLICIES:
            raise ConfigError(f"fusion={self.fusion!r} is not one of {FUSION_POLICIES}")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise ConfigError(f"threads={self.threads!r} must be a positive integer")
        if not self.budget_s > 0:
            raise ConfigError(f"budget_s={self.budget_s!r} must be a positive number of seconds")
        if self.race_margin < 0 or not 0 <= self.race_share <= 1:
            raise ConfigError(f"race_margin={self.race_margin!r} must be >= 0 and race_share={self.race_share!r}"
                              " between 0 and 1")


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not an integer") from None


def config_from_env(**overrides) -> Config:
    """A Config from the environment, with explicit keyword overrides winning.

    An override of ``None`` means "not given" (use the environment or default).
    """
    values: dict = {
        "threads": _env_int("WEFT_THREADS", os.cpu_count() or 1),
        "cc": os.environ.get("WEFT_CC") or "cc",
    }
    if os.environ.get("WEFT_CACHE_DIR"):
        values["cache_dir"] = Path(os.environ["WEFT_CACHE_DIR"])
    if os.environ.get("WEFT_BUDGET_S"):
        try:
            values["budget_s"] = float(os.environ["WEFT_BUDGET_S"])
        except ValueError:
            raise ConfigError(f"WEFT_BUDGET_S={os.environ['WEFT_BUDGET_S']!r} is not a number of seconds") from None
    values.update({key: value for key, value in overrides.items() if value is not None})
    if values.get("fusion") == "priced" and not generic_fusion():
        values["fusion"] = "matchers"
    return Config(**values)


def generic_fusion() -> bool:
    """False when ``WEFT_GENERIC_FUSION`` says off (``off``, ``0``, ``false``, ``no``)."""
    text = os.environ.get("WEFT_GENERIC_FUSION", "on").strip().lower()
    if text in ("off", "0", "false", "no"):
        return False
    if text in ("on", "1", "true", "yes", ""):
        return True
    raise ConfigError(f"WEFT_GENERIC_FUSION={text!r}: use on or off")
