"""The f64 truth's vocabulary matrices (the embedding and the lm_head) kept as the checkpoint
stores them, widened only where a forward reads them: the embedding's rows for the ids it looks
up, the lm_head a block of rows at a time into one f64 buffer reused for every block.

Widened whole, they were the truth's largest allocation: 226 MB of f64 for the real SmolLM2-135M
(55,000 fresh pages a truth), 1 GB for a 1.1B llama shape with an untied lm_head (its truth peaked
at 2.5 GB; 1.5 GB kept as stored). Widening bf16, f16 or f32 to f64 is exact, so every looked-up
row is the same f64 row, and each logit is the same f64 dot product over the hidden size (blocks
cut the vocab, never the sum): docs/verify.md, "Memory".
"""

from __future__ import annotations

from functools import partial
from typing import Any

#: lm_head rows widened at a time: 4096 x a 2048-wide hidden size is 64 MiB of f64
BLOCK_ROWS = 4096


def vocab_modules(torch: Any, model: Any) -> list[Any]:
    """The model's embedding and lm_head where they are the plain torch modules `widen_on_read`
    handles (an `nn.Embedding` without `max_norm`, which would rewrite its rows; an `nn.Linear`);
    a module of another kind is widened whole, as every other weight."""
    try:
        emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    except (NotImplementedError, AttributeError):  # a model that does not say which they are
        return []
    out = []
    if isinstance(emb, torch.nn.Embedding) and emb.max_norm is None:
        out.append(emb)
    if isinstance(head, torch.nn.Linear) and head is not emb:
        out.append(head)
    return out


def widen_on_read(torch: Any, modules: list[Any], dtype: Any) -> None:
    """Each of `vocab_modules`' modules computes in `dtype` from its weight as stored: the
    embedding on the rows its ids look up, the lm_head block by block."""
    for mod in modules:
        lookup = isinstance(mod, torch.nn.Embedding)
        mod.forward = partial(_looked_up if lookup else _blocked_linear, torch, mod, dtype)


def _looked_up(torch: Any, mod: Any, dtype: Any, ids: Any, *args: Any, **kwargs: Any) -> Any:
    """The module's own forward (a subclass's scaling too, gemma's) on just the rows `ids` looks
    up, widened, and on each id's index among them; then the stored weight is back. `padding_idx`
    is unset meanwhile: it only shapes gradients, and may lie past those rows."""
    rows, index = torch.unique(ids, return_inverse=True)
    stored = mod.weight, mod.padding_idx
    mod.weight = torch.nn.Parameter(stored[0][rows].to(dtype), requires_grad=False)
    mod.padding_idx = None
    try:
        return type(mod).forward(mod, index, *args, **kwargs)
    finally:
        mod.weight, mod.padding_idx = stored


def _blocked_linear(torch: Any, mod: Any, dtype: Any, x: Any) -> Any:
    """`mod(x)` in `dtype`: x times each block of the weight's rows, widened into one buffer."""
    weight, bias = mod.weight, mod.bias
    rows = weight.shape[0]
    x = x.to(dtype)
    out = x.new_empty((*x.shape[:-1], rows))
    block = torch.empty((min(BLOCK_ROWS, rows), weight.shape[1]), dtype=dtype)
    for lo in range(0, rows, BLOCK_ROWS):
        hi = min(lo + BLOCK_ROWS, rows)
        w = block[: hi - lo]
        w.copy_(weight[lo:hi])
        out[..., lo:hi] = torch.nn.functional.linear(x, w, None if bias is None else bias[lo:hi].to(dtype))
    return out
