"""Weft: a tensor compiler for CPUs that fuses a region only when a price says it pays."""

__version__ = "0.1.0"

from weft.errors import (  # noqa: E402
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

__all__ = [
    "AxisError", "CompileError", "ConfigError", "DTypeError", "InputError", "ShapeError",
    "WeftError", "WeftIRError", "WorkloadError", "__version__",
]

from weft import nn  # noqa: E402  (the front end: weft.trace / weft.spec / weft.nn)
from weft.nn import spec, trace  # noqa: E402

__all__ += ["nn", "spec", "trace"]

from weft.compile import CompiledPlan, compile  # noqa: E402,A004  (native code: weft.compile)

__all__ += ["CompiledPlan", "compile"]
