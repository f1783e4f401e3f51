"""Decompositions the backend uses in place of PyTorch's core ones (``weft.torch.decompositions``).

``_scaled_dot_product_flash_attention_for_cpu``: what ``F.scaled_dot_product_attention`` becomes
on CPU when an input needs a gradient. PyTorch's core decomposition (torch 2.13) returns the
attention *probabilities* as the op's second output, the log-sum-exp; aot_autograd keeps the op's
backward (``_scaled_dot_product_flash_attention_for_cpu_backward``), which reads that output as the
log-sum-exp, so every gradient through SDPA came out wrong while the loss was right. This one
computes the scores once and returns both the output (as the math path computes it) and the real
log-sum-exp over the keys (0 for a row whose every key is masked, as the kernel gives: the
backward's probabilities there are exp(-inf - 0) = 0, eager's zero gradients), laid out as the
flash kernel lays it out. Under ``no_grad`` the
log-sum-exp is dead and the trace drops it.
"""

from __future__ import annotations

import math

import torch

aten = torch.ops.aten


def flash_attention_for_cpu(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    """(output, logsumexp) of ``_scaled_dot_product_flash_attention_for_cpu``: PyTorch's math path
    (``q*sqrt(s) @ (k*sqrt(s))^T``, the causal mask top-left aligned, a bool mask as -inf, a float
    mask added, the safe softmax: a row with every key masked gives 0) for the output, and
    ``logsumexp`` of the same scores over the keys. Dropout is left to the op itself."""
    if dropout_p != 0.0 or query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return NotImplemented  # the op stays whole (a reported fallback), with its own log-sum-exp
    length, keys = query.shape[-2], key.shape[-2]
    factor = math.sqrt(scale if scale is not None else 1.0 / math.sqrt(query.shape[-1]))
    if query.shape[1] != key.shape[1]:  # grouped-query attention: each key head serves a group
        group = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(group, dim=1)
        value = value.repeat_interleave(group, dim=1)
    scores = (query * factor) @ (key * factor).transpose(-2, -1)
    if is_causal:
        keep = torch.ones(length, keys, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype is torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    probabilities = aten._safe_softmax.default(scores, -1)
    output = probabilities @ value
    # both as the flash kernel allocates them: output (N, L, H, E) and logsumexp (N, L, H) in memory
    output = output.permute(2, 0, 1, 3).contiguous(memory_format=torch.contiguous_format).permute(1, 2, 0, 3)
    logsumexp = torch.logsumexp(scores, -1)
    logsumexp = logsumexp.masked_fill(logsumexp == float("-inf"), 0.0)  # a row with every key masked: 0, as the kernel's
    logsumexp = logsumexp.transpose(1, 2).contiguous().transpose(1, 2)
    return output, logsumexp


DECOMPOSITIONS = {
    aten._scaled_dot_product_flash_attention_for_cpu.default: flash_attention_for_cpu,
}
