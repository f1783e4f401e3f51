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

The loop takes ``CHAINS`` vectors a step: the max in two register chains, each dependent's
sum in ``CHAINS`` register chains (vector k of a step into chain k), combined once per row
in a fixed order, ``(c0 + c1) + (c2 + c3)``, into the row's lane accumulator. Before, the
sum was one chain through the row's accumulator in memory: a store-to-load round trip per
vector on the loop's critical path.
"""

from __future__ import annotations

import dataclasses

from weft.codegen.body import SCALAR_TYPE
from weft.codegen.render import combine, fold_identity
from weft.ir import Combiner, DType, expr_loads
from weft.lower.access import Access, load_access
from weft.lower.online import PIPE_BLOCK

CHAINS = 4
"""Vectors per step of the pipelined loop: each dependent folds them into its own register
chain (the adds' latency hidden, and no accumulator through memory), combined once per row."""

PREFETCH_AHEAD = 2 * PIPE_BLOCK
"""Points ahead of the step that the hot loop prefetches (8 KiB): 512 x 128 000 logits at +16 B,
1 thread, hand-written loop: none 13.6 ms, 1024 points 12.5, 2048 12.2, 4096 12.2."""

PLAIN_LOADS = True
"""The hot loop reads vectors by one unaligned load, not as whole lines (two aligned loads and a
permute: the permutes compete with the exps; same loop, logits at +16 B: 15.0 ms with line
loads, 12.2 ms without)."""


def _shifted(writer, variable: str):
    """The writer's dependents with the pass axis read at ``variable`` instead of the step."""
    return [dataclasses.replace(dependent, env=tuple((axis, variable if var == writer.step else var)
                                                     for axis, var in dependent.env))
            for dependent in writer.dependents]


def _reference_term(writer, lines, depth: int, counter, vector: bool, offset: int = 0) -> str:
    """The reference's term at the step (plus ``offset`` points)."""
    online = writer.online
    env = {axis: var for axis, var, _, _ in writer.rows}
    env[online.reference_axis] = f"{writer.step} + {offset}" if offset else writer.step
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
    """The pass of ``writer`` (``OnlinePass.pipelined``) as C: the module docstring's loop, per row."""
    online, lanes, step, block = writer.online, writer.lanes, writer.step, PIPE_BLOCK
    extent = online.extent
    dtype = writer.local_views[writer.reference.output].dtype
    ctype = SCALAR_TYPE[dtype]
    combiner = online.reference_combiner
    identity = fold_identity(combiner, dtype)
    emit = lambda depth, text: lines.append("    " * depth + text)  # noqa: E731
    writer.plain_loads = PLAIN_LOADS  # the loop is compute-bound (PLAIN_LOADS)
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
    writer.chains = {}
    for dependent in writer.dependents:  # the row's vector accumulator in CHAINS registers
        names = [f"{dependent.accumulator}_c{k}" for k in range(CHAINS)]
        init = fold_identity(dependent.fold.combiner, dtype)
        emit(inner, f"wf_vf {names[0]} = wfc_load_f({writer._vector_slot(dependent)}); "
                    + " ".join(f"wf_vf {name} = wfc_splat_f({init});" for name in names[1:]))
        writer.chains[dependent.accumulator] = names
    writer.registers = {acc: names[0] for acc, names in writer.chains.items()}
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
    emit(body, f"{step} = wo_jb; wo_stop = wfc_minl(wo_jb + {block}, {extent});")
    emit(body, f"{ctype} wo_bm = wo_ref_old[0];")
    emit(body, f"wf_vf wo_vm = wfc_splat_f({identity}); wf_vf wo_vm1 = wo_vm;")
    span = CHAINS * lanes
    emit(body, f"for (; {step} + {span} <= wo_stop; {step} += {span}) {{  /* this block's max, the last one's terms */")
    emit(body + 1, f"const long wo_jp = {step} - {block};")
    _prefetch_ahead(writer, lines, body + 1, counter)
    for k in range(CHAINS):  # two max chains; vector k of the span folds into chain k
        term = _reference_term(writer, lines, body + 1, counter, vector=True, offset=k * lanes)
        vm = "wo_vm" if k % 2 == 0 else "wo_vm1"
        emit(body + 1, f"{vm} = {_hot_combine(writer, dtype, vm, term)};")
    for k in range(CHAINS):
        writer.registers = {acc: names[k] for acc, names in writer.chains.items()}
        _steps(writer, lines, body + 1, counter, dtype, _shifted(writer, f"wo_jp + {k * lanes}" if k else "wo_jp"),
               vector=True)
    writer.registers = {acc: names[0] for acc, names in writer.chains.items()}
    emit(body, "}")
    shifted = _shifted(writer, "wo_jp")
    emit(body, f"for (; {step} + {lanes} <= wo_stop; {step} += {lanes}) {{  /* the span's rest */")
    emit(body + 1, f"const long wo_jp = {step} - {block};")
    term = _reference_term(writer, lines, body + 1, counter, vector=True)
    emit(body + 1, f"wo_vm = {_hot_combine(writer, dtype, 'wo_vm', term)};")
    _steps(writer, lines, body + 1, counter, dtype, shifted, vector=True)
    emit(body, "}")
    emit(body, f"wo_vm = {combine(combiner, dtype, True, 'wo_vm', 'wo_vm1')};")
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
    for dependent in writer.dependents:  # the chains in a fixed order: (c0 + c1) + (c2 + c3)
        names = writer.chains[dependent.accumulator]
        while len(names) > 1:
            names = [combine(dependent.fold.combiner, dtype, True, names[k], names[k + 1]) for k in range(0, len(names), 2)]
        emit(inner, f"wfc_store_f({writer._vector_slot(dependent)}, {names[0]});")
    writer.chains, writer.registers = {}, {}
    if plain_reference(writer):
        _exact_reference_on_nan(writer, lines, inner, counter, dtype)
    emit(inner, f"wo_ref[{writer.row_flat}] = wo_ref_new[0];")
    writer._close_row_loops(lines, inner)
    writer._write_finals(lines, indent, depth, counter, dtype)
    writer.plain_loads = False


def plain_reference(writer) -> bool:
    """Whether the hot loop may fold the reference (a float max) by compare-select, one max
    instruction (``wfc_pmax_f``), instead of the NaN-propagating max (a select of two compares,
    ~3 cycles a vector on the 16-lane EPYC: 2.34 -> 3.67 ns a vector of exp-and-sum).

    Both give the same bits wherever no term is NaN (the compare-select *is* the oracle's rule
    then). A NaN term makes its term ``exp(NaN - R)`` of every dependent NaN (the rewrite admits
    only that form), so a sum dependent ends NaN; the row's reference is then folded again
    exactly (``_exact_reference_on_nan``), and what reads it sees the oracle's NaN (or +inf: a row
    with +inf and no NaN also ends NaN, by inf - inf)."""
    return (writer.online.reference_combiner is Combiner.MAX
            and writer.local_views[writer.reference.output].dtype is DType.FLOAT32
            and any(dependent.fold.combiner is Combiner.SUM for dependent in writer.dependents))


def _hot_combine(writer, dtype, acc: str, term: str) -> str:
    if plain_reference(writer):
        return f"wfc_pmax_f({acc}, {term})"
    return combine(writer.online.reference_combiner, dtype, True, acc, term)


def _exact_reference_on_nan(writer, lines: list[str], depth: int, counter, dtype) -> None:
    """After a row's pass: if its first sum dependent is NaN, the row's reference folded again
    with the NaN-propagating max, one point at a time (a rare row: a NaN or an infinity in it)."""
    emit = lambda d, text: lines.append("    " * d + text)  # noqa: E731
    dependent = next(d for d in writer.dependents if d.fold.combiner is Combiner.SUM)
    ctype = SCALAR_TYPE[dtype]
    emit(depth, f"{{ const wf_vf wo_chk = wfc_load_f({writer._vector_slot(dependent)});")
    emit(depth + 1, f"int wo_nan = {writer._slot(dependent)} != {writer._slot(dependent)};")
    emit(depth + 1, f"for (int wo_l = 0; wo_l < {writer.lanes}; wo_l++) wo_nan |= wo_chk[wo_l] != wo_chk[wo_l];")
    emit(depth + 1, "if (wo_nan) { /* a NaN term: the reference exactly, NaN-propagating */")
    combiner, step = writer.online.reference_combiner, writer.step
    emit(depth + 2, f"{ctype} wo_bx = {fold_identity(combiner, dtype)};")
    emit(depth + 2, f"for ({step} = 0; {step} < {writer.online.extent}; {step}++) {{")
    term = _reference_term(writer, lines, depth + 3, counter, vector=False)
    emit(depth + 3, f"wo_bx = {combine(combiner, dtype, False, 'wo_bx', term)};")
    emit(depth + 2, "}")
    emit(depth + 2, "wo_ref_new[0] = wo_bx;")
    emit(depth + 1, "}")
    emit(depth, "}")


def _prefetch_ahead(writer, lines: list[str], depth: int, counter) -> None:
    """Prefetches of the reference's contiguous float32 streams ``PREFETCH_AHEAD`` points past
    the step (clamped to the row), one per vector of the step: the read is issued early enough
    that the exps beside it do not wait for it."""
    online, lanes = writer.online, writer.lanes
    env = {axis: var for axis, var, _, _ in writer.rows}
    renderer = writer._renderer(lines, depth, counter, env, {})
    for load in expr_loads(online.reference_term):
        view = renderer.views[load.buffer]
        if view.dtype is not DType.FLOAT32 or load_access(load, view.strides, online.reference_axis) is not Access.CONTIGUOUS:
            continue
        for k in range(CHAINS):
            renderer.env[online.reference_axis] = f"wfc_minl({writer.step} + {PREFETCH_AHEAD + k * lanes}, {online.extent - 1})"
            lines.append("    " * depth + f"__builtin_prefetch(&{view.pointer}[{renderer.address(view, load.index)}], 0, 3);")
