"""The NumPy oracle: the definition of correct output for every plan."""

from weft.oracle.interpreter import (
    NUMPY_BINARY,
    NUMPY_DTYPE,
    NUMPY_UNARY,
    check_inputs,
    run,
    run_all,
    run_kernel,
)

__all__ = ["NUMPY_BINARY", "NUMPY_DTYPE", "NUMPY_UNARY", "check_inputs", "run", "run_all", "run_kernel"]
