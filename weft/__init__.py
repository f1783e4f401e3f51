"""Weft: a tensor compiler for CPUs that fuses a region only when a price says it pays."""

from weft import nn  # the front end: weft.trace / weft.spec / weft.nn
from weft.compile import CompiledPlan, compile  # noqa: A004  (native code: weft.compile)
from weft.config import Config
from weft.errors import (
    AxisError,
    CompileError,
    ConfigError,
    DTypeError,
    InputError,
    ShapeError,
    WeftError,
    WeftIRError,
    WorkloadError,
)
from weft.nn import spec, trace
from weft.version import __version__

__all__ = [
    "AxisError", "CompileError", "CompiledPlan", "Config", "ConfigError", "DTypeError", "InputError", "ShapeError",
    "WeftError", "WeftIRError", "WorkloadError", "__version__", "compile", "nn", "spec", "trace",
]
