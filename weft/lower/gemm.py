"""Recognise plain (batched) GEMM members that a BLAS library body may serve.

Only under Inference: BLAS reorders the k-sum (blocking, FMA), so it is not the
oracle's order. A member matches when it is exactly

    c[(b,) i, j] = sum_k a[(b,) i, k] * b[(b,) k, j]      (either operand may be transposed,
                                                          either may lack the batch axis)

with float32 buffers indexed by plain axis variables and addressed in place.
"""

from __future__ import annotations

from weft.ir import AxisIndex, Binary, BinaryOp, Combiner, DType, Kernel, Load
from weft.lower.nest import BufferView, GemmCall

# Below this extent on any of m, n, k a BLAS sgemm call loses to the generated nest
# (measured: a 1 x 4096 x 4096 product took 15-76 ms through sgemm, 4-8 ms generated).
GEMM_MIN_EXTENT = 16


def _axis_names(load: Load) -> tuple[str, ...] | None:
    if load.padding is not None or not all(isinstance(i, AxisIndex) for i in load.index):
        return None
    return tuple(i.axis for i in load.index)


def _in_place(view: BufferView) -> bool:
    from weft.lower.access import row_major_strides

    return all(o == 0 for o in view.offsets) and view.strides == row_major_strides(view.shape)


def match_gemm(kernel: Kernel, views: dict[str, BufferView]) -> GemmCall | None:
    """A ``GemmCall`` for ``kernel`` if it is a plain GEMM, else None."""
    fold = kernel.fold
    if fold is None or fold.combiner is not Combiner.SUM or len(fold.axes) != 1:
        return None
    body = kernel.body
    if not (isinstance(body, Binary) and body.op is BinaryOp.MUL):
        return None
    if not (isinstance(body.left, Load) and isinstance(body.right, Load)):
        return None
    if len(kernel.axes) not in (2, 3):
        return None
    k = fold.axes[0].name
    batch_axis = kernel.axes[0].name if len(kernel.axes) == 3 else None
    i, j = kernel.axes[-2].name, kernel.axes[-1].name
    extents = {a.name: a.extent for a in kernel.all_axes}
    loads = {}
    for load in (body.left, body.right):
        names = _axis_names(load)
        if names is None or views[load.buffer].dtype is not DType.FLOAT32 or not _in_place(views[load.buffer]):
            return None
        core = tuple(n for n in names if n != batch_axis)
        if len(names) - len(core) > 0 and names[0] != batch_axis:
            return None
        if sorted(core) == sorted((i, k)) and "a" not in loads:
            loads["a"] = (load, core == (k, i), len(names) == 3)
        elif sorted(core) == sorted((j, k)) and "b" not in loads:
            loads["b"] = (load, core == (j, k), len(names) == 3)
        else:
            return None
    if set(loads) != {"a", "b"} or i == j:
        return None
    output = views[kernel.output]
    if output.dtype is not DType.FLOAT32 or not _in_place(output):
        return None
    m, n, kk = extents[i], extents[j], extents[k]
    if min(m, n, kk) < GEMM_MIN_EXTENT:
        return None  # matrix-vector shapes: sgemm is many times slower than the generated nest
    (a_load, a_trans, a_batched), (b_load, b_trans, b_batched) = loads["a"], loads["b"]
    batch = extents[batch_axis] if batch_axis else 1
    return GemmCall(
        kernel=kernel,
        a=views[a_load.buffer],
        b=views[b_load.buffer],
        c=output,
        m=m,
        n=n,
        k=kk,
        lda=m if a_trans else kk,
        ldb=kk if b_trans else n,
        ldc=n,
        trans_a=a_trans,
        trans_b=b_trans,
        batch=batch,
        batch_strides=(m * kk if a_batched else 0, kk * n if b_batched else 0, m * n),
    )
