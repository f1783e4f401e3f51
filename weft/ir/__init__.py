"""Weft's IR: buffers, members (kernels), plans; verification, printing, digests."""

from weft.ir.digest import kernel_set_digest, output_digest
from weft.ir.nodes import (
    COMPARISONS,
    LOGICAL,
    OUTSIDE,
    TRANSCENDENTAL,
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    Cast,
    Combiner,
    Const,
    DType,
    Expr,
    Fold,
    IndexAdd,
    IndexConst,
    IndexExpr,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    IndexValue,
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    UnaryOp,
    Where,
    as_index,
    expr_axes,
    expr_children,
    expr_loads,
    index_axes,
    walk_expr,
)
from weft.ir.printer import format_expr, format_index, format_kernel, format_plan
from weft.ir.verify import expr_dtype, index_range, verify

__all__ = [name for name in dir() if not name.startswith("_")]
