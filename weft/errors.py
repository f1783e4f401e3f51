"""Every user-facing failure in Weft is a ``WeftError`` subclass.

Messages name the operation, the shapes involved and the fix, so a user can act
on the error without reading Weft's source.
"""

from __future__ import annotations


class WeftError(Exception):
    """Base class of every error Weft raises on purpose."""


class WeftIRError(WeftError):
    """A plan violates an IR invariant; raised by ``weft.ir.verify``."""


class ShapeError(WeftError):
    """Operand shapes do not fit the operation (matmul, broadcast, reshape...)."""


class AxisError(WeftError):
    """An axis argument is out of range or repeated."""


class DTypeError(WeftError):
    """A dtype is unsupported or does not fit the operation."""


class InputError(WeftError):
    """Arrays passed to a compiled plan or the oracle do not match the plan."""


class CompileError(WeftError):
    """The C compiler is missing or failed.

    Carries the command, the compiler's stderr and the path of the saved C file.
    """

    def __init__(self, message: str, command: tuple[str, ...] = (), stderr: str = "", source_path: str = ""):
        super().__init__(message)
        self.command = command
        self.stderr = stderr
        self.source_path = source_path


class ConfigError(WeftError):
    """A compile option or environment variable has an invalid value."""


class WorkloadError(WeftError):
    """An unknown workload name or bad workload parameter."""
