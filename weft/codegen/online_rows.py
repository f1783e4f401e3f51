"""C for a one pass with nothing streamed (cross-entropy or log-sum-exp from logits),
software-pipelined so the memory read and the exps overlap (Inference only).

``weft.codegen.online`` walks such a row in one block: the row's max over all of it
(a read from memory that computes nothing), then the exps over it again (compute that
reads nothing new), so the two never overlap. Here each row runs in blocks of
``PIPE_BLOCK`` points (4 KiB, in L1), and one loop takes block b's max together with
block b-1's exps against the reference so far::

    ref = max over block 0
    for b = 1 ..:                       /* one loop over the block's vectors */
        vm = max(vm, x[b, j]);  acc += exp(x[b-1, j] - ref)
        new = max(ref, vm); if new != ref: acc *= exp(ref - new); ref = new
    acc += exp(x[last block] - ref)

Measured in C on the 16-lane EPYC (512 x 128 000 logits, 1 thread, thread CPU time):
max then exps per row 28.2 ms, pipelined 18.2 ms; the exps alone 15.6 ms, the read alone
9.6 ms. The accumulators fold in ascending order of the blocks' points, rescaled once
per block like the blocked pass (the Inference contract allows the reassociation).
"""

from __future__ import annotations

import dataclasses

from weft.codegen.body import SCALAR_TYPE
from weft.codegen.render import combine, fold_identity
from weft.ir import DType

PIPE_BLOCK = 1024
"""Points of the pass axis per pipelined block: 4 KiB of float32, so block b-1 is still in
L1 when its exps run beside block b's loads."""


def pipelinable(writer) -> bool:
    """Whether ``writer`` (an ``OnlinePassWriter``) is a plain row pass this module can write."""
    extent = writer.online.extent
    return (
        writer.fold_lanes and not writer.streamed_nests and not writer.rounded and writer.block == extent
        and extent >= 2 * PIPE_BLOCK and PIPE_BLOCK % writer.lanes == 0 and bool(writer.dependents)
        and all(dependent.count == 1 for dependent in writer.dependents)
        and writer.local_views[writer.reference.output].dtype is DType.FLOAT32
    )


def _shifted(writer, variable: str):
    """The writer's dependents with the pass axis read at ``variable`` instead of the step."""
    return [dataclasses.replace(dependent, env=tuple((axis, variable if var == writer.step else var)
                                                     for axis, var in dependent.env))
            for dependent in writer.dependents]


def _reference_term(writer, lines, depth: int, counter, vector: bool) -> str:
    online = writer.online
    env = {axis.name: var for axis, (_, var, _, _) in zip(writer.reference.axes, writer.rows, strict=True)}
    env[online.reference_axis] = writer.step
    renderer = writer._renderer(lines, depth, counter, env, {})
    if vector:
        renderer.vector_axis = online.reference_axis
        return renderer.splat(renderer.render(online.reference_term))
    return renderer.render(online.reference_term).code


def _steps(writer, lines, depth: int, counter, dtype, dependents, vector: bool) -> None:
    """Every dependent's term at one step (``OnlinePassWriter._render_step``) for ``dependents``."""
    kept = writer.dependents
    writer.dependents = dependents
    try:
        writer._render_step(lines, depth, counter, dtype, vector=vector)
    finally:
        writer.dependents = kept


def write_pipelined(writer, lines: list[str], indent: int, counter) -> None:
    """The pass of ``writer`` (``pipelinable``) as C: the module docstring's loop, per row."""
    online, lanes, step, block = writer.online, writer.lanes, writer.step, PIPE_BLOCK
    extent = online.extent
    dtype = writer.local_views[writer.reference.output].dtype
    ctype = SCALAR_TYPE[dtype]
    combiner = online.reference_combiner
    identity = fold_identity(combiner, dtype)
    emit = lambda depth, text: lines.append("    " * depth + text)  # noqa: E731
    emit(indent, f"{{ /* {writer.name}: {', '.join(online.members)} in one pass, pipelined blocks of {block} */")
    depth = indent + 1
    emit(depth, f"{ctype} wo_ref[{writer.row_count}];")
    emit(depth, f"for (long wo_n = 0; wo_n < {writer.row_count}; wo_n++) wo_ref[wo_n] = {identity};")
    for dependent in writer.dependents:
        init = fold_identity(dependent.fold.combiner, dtype)
        emit(depth, f"{ctype} {dependent.accumulator}[{writer.row_count}];")
        emit(depth, f"for (long wo_n = 0; wo_n < {writer.row_count}; wo_n++) {dependent.accumulator}[wo_n] = {init};")
        emit(depth, f"{ctype} {dependent.accumulator}_v[{writer.row_count * lanes}] __attribute__((aligned(64)));")
        emit(depth, f"for (long wo_n = 0; wo_n < {writer.row_count * lanes}; wo_n++) {dependent.accumulator}_v[wo_n] = {init};")
    writer._parked = set()
    inner = writer._row_loops(lines, depth)
    emit(inner, f"{ctype} wo_ref_old[1] = {{wo_ref[{writer.row_flat}]}}; {ctype} wo_ref_new[1] = {{wo_ref_old[0]}};"
                f" {ctype} wo_ref_run[1];")
    emit(inner, f"long wo_jb = 0; long {step} = 0; long wo_stop = {block};")
    emit(inner, "{ /* block 0: its reference only */")
    writer._render_reference(lines, inner + 1, counter, dtype)
    writer._render_rescale(lines, inner + 1, counter, dtype)
    emit(inner + 1, f"wo_ref_old[0] = wo_ref_new[0]; {writer.running_reference(dtype)}")
    emit(inner, "}")
    emit(inner, f"for (wo_jb = {block}; wo_jb < {extent}; wo_jb += {block}) {{")
    body = inner + 1
    shifted = _shifted(writer, "wo_jp")
    emit(body, f"{step} = wo_jb; wo_stop = wfc_minl(wo_jb + {block}, {extent});")
    emit(body, f"{ctype} wo_bm = wo_ref_old[0];")
    emit(body, f"wf_vf wo_vm = wfc_splat_f({identity});")
    emit(body, f"for (; {step} + {lanes} <= wo_stop; {step} += {lanes}) {{  /* this block's max, the last one's terms */")
    emit(body + 1, f"const long wo_jp = {step} - {block};")
    term = _reference_term(writer, lines, body + 1, counter, vector=True)
    emit(body + 1, f"wo_vm = {combine(combiner, dtype, True, 'wo_vm', term)};")
    _steps(writer, lines, body + 1, counter, dtype, shifted, vector=True)
    emit(body, "}")
    emit(body, f"for (long wo_jp = {step} - {block}; wo_jp < wo_jb; wo_jp += {lanes}) {{  /* the last block's rest */")
    _steps(writer, lines, body + 1, counter, dtype, shifted, vector=True)
    emit(body, "}")
    emit(body, f"for (int wo_l = 0; wo_l < {lanes}; wo_l++) wo_bm = {combine(combiner, dtype, False, 'wo_bm', 'wo_vm[wo_l]')};")
    emit(body, f"for (; {step} < wo_stop; {step}++) {{")
    term = _reference_term(writer, lines, body + 1, counter, vector=False)
    emit(body + 1, f"wo_bm = {combine(combiner, dtype, False, 'wo_bm', term)};")
    emit(body, "}")
    emit(body, "wo_ref_new[0] = wo_bm;")
    writer._render_rescale(lines, body, counter, dtype)
    emit(body, f"wo_ref_old[0] = wo_ref_new[0]; {writer.running_reference(dtype)}")
    emit(inner, "}")
    last = (extent - 1) // block * block
    emit(inner, f"wo_jb = {last}; {step} = {last};  /* the last block's terms */")
    writer._render_steps(lines, inner, counter, dtype, str(extent), True)
    emit(inner, f"wo_ref[{writer.row_flat}] = wo_ref_new[0];")
    writer._close_row_loops(lines, inner)
    writer._write_finals(lines, indent, depth, counter, dtype)
