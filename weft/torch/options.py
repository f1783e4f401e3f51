"""The backend's options: ``torch.compile(model, backend="weft", options={...})``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from weft.config import CONTRACTS, FUSION_POLICIES
from weft.errors import ConfigError

FALLBACK_POLICIES = ("warn", "error")
DYNAMIC_POLICIES = ("buckets", "exact")


@dataclass(frozen=True, slots=True)
class Options:
    """``contract``: "inference" (default: reassociation allowed, within the Inference
    tolerance of eager) or "strict"; ``threads``: OpenMP threads (None: WEFT_THREADS or
    the CPU count); ``fusion``: a weft.compile fusion policy (default "priced": fuse where the price says it pays);
    ``fallback``: "warn" (unsupported ops run in eager, reported once per compile) or
    "error" (raise ``FallbackError``); ``dynamic``: for a graph with symbolic sizes,
    "buckets" (default: pad each length to the next power of two, at least 16, and compile
    once per bucket where ``weft.torch.buckets`` proves padding sound; else per length, with
    the reason reported) or "exact" (compile once per distinct length)."""

    contract: str = "inference"
    threads: int | None = None
    fusion: str = "priced"
    fallback: str = "warn"
    dynamic: str = "buckets"


def parse_options(given: Mapping[str, object] | None) -> Options:
    values = dict(given or {})
    known = set(Options.__dataclass_fields__)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"weft backend: unknown option(s) {unknown}; the options are {sorted(known)}")
    options = Options(**values)
    if options.contract not in CONTRACTS:
        raise ConfigError(f"weft backend: contract={options.contract!r} is not one of {CONTRACTS}")
    if options.fusion not in FUSION_POLICIES:
        raise ConfigError(f"weft backend: fusion={options.fusion!r} is not one of {FUSION_POLICIES}")
    if options.fallback not in FALLBACK_POLICIES:
        raise ConfigError(f"weft backend: fallback={options.fallback!r} is not one of {FALLBACK_POLICIES}")
    if options.dynamic not in DYNAMIC_POLICIES:
        raise ConfigError(f"weft backend: dynamic={options.dynamic!r} is not one of {DYNAMIC_POLICIES}")
    if options.threads is not None and (not isinstance(options.threads, int) or options.threads < 1):
        raise ConfigError(f"weft backend: threads={options.threads!r} must be a positive integer or None")
    return options
