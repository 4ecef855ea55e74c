"""PK4xx about a GGUF's tensors for every loader: the quantization types candle 0.11.0 reads, the
Q/K row layout its rope pairing needs (the one lint rule that reads tensor data), and the
tensors a loader asks for.
"""

from __future__ import annotations

from portkit.rules.base import Context, backticked
from portkit.rules.gguf.base import ALL_LOADERS, GgufRule
from portkit.semantics.gguf import (
    PERMUTE_QK,
    loader_required_tensors,
    loads,
    md_u32,
    metadata_prefix,
    missing_tensor_error,
    parses,
    split_qkv,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding
    from portkit.model import GgufFile


class UnsupportedGgufTensorType(GgufRule):
    """Tensor types candle cannot parse or load.

    ## What it does
    Flags tensors whose ggml type candle does not know (IQ*, TQ*, MXFP4, I8..F64: the whole
    file is refused at parse) or knows but cannot load (Q8_1, Q8_K).

    ## Why is this bad?
    `unknown dtype for tensor 16` when reading the header, or `quantized type Q8_1 is not
    supported yet` when loading the tensor.

    ## Example
    An IQ2_XXS GGUF.

    ## Fix
    None; use a Q4_K/Q5_K/Q6_K/Q8_0/F16 conversion.

    ## Candle source
    candle-core-0.11.0/src/quantized/mod.rs:300-321; ggml_file.rs:153-188;
    gguf_file.rs:538-539.

    ## Verification
    crash: candle must fail with the same message.

    ## References
    - llama.cpp quantization types (ggml.h `ggml_type`)
    """

    code = "PK408"
    name = "unsupported-gguf-tensor-type"
    severity = "error"
    effect = "load-error"
    fix_title = "Use a quantization candle supports (Q4_0..Q8_0, Q2_K..Q6_K, F16, BF16, F32)"
    probe_kind = "crash"

    loaders = ALL_LOADERS  # candle-core's GGUF reader, shared by every loader

    def check(self, ctx: Context) -> Iterable[Finding]:
        readable, loadable = parses(ctx.target.candle), loads(ctx.target.candle)
        for g, _v in self.each(ctx):
            bad: dict[int, list[str]] = {}
            for t in g.tensors.values():
                if t.type_id not in loadable:
                    bad.setdefault(t.type_id, []).append(t.name)
            for tid, names in sorted(bad.items()):
                tname = g.tensors[names[0]].type_name
                if tid not in readable:
                    err = f"unknown dtype for tensor {tid}"
                    when = "refuses the whole file while reading the header"
                else:
                    err = f"quantized type {tname.replace('_K', 'K')} is not supported yet"
                    when = "fails loading the tensor"
                shown = backticked(names)
                yield self.file_finding(
                    ctx,
                    g,
                    f"{len(names)} tensor{'s are' if len(names) > 1 else ' is'} {tname} ({shown}); candle "
                    f"{ctx.target.candle} {when}: `{err}`",
                    candle_value=err,
                    expect=err,
                )


class QkRowsNotPermuted(GgufRule):
    """Layer 0's Q/K rows in the GGUF are not laid out for the RoPE pairing candle uses.

    ## What it does
    When HF safetensors sit beside the GGUF, dequantizes the first head of `blk.0.attn_q` and
    `blk.0.attn_k` and compares it with the HF `q_proj`/`k_proj` rows as written and as
    llama.cpp's converter permutes them (`reshape(n_head, 2, head_dim/2, in).swapaxes(1, 2)`).
    The only lint rule that reads tensor data (one head per tensor).

    ## Why is this bad?
    candle pairs llama RoPE interleaved (`rope_i`), which equals transformers'
    `rotate_half` only on permuted rows. A GGUF written without the permutation (or with it,
    for a NEOX architecture) loads and runs, and attention is silently wrong after the first
    position.

    ## Example
    A GGUF written by a custom exporter that copied `q_proj` rows unchanged.

    ## Fix
    None in config.json; re-convert with llama.cpp's `convert_hf_to_gguf.py`.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:178-189 (`rope` vs `rope_i`),
    :406-428.

    ## Verification
    numeric: the GGUF runner's logits differ from transformers' from position 1 on, and
    match once the rows are permuted.

    ## References
    - https://github.com/jzhang38/TinyLlama/issues/24, https://github.com/ggml-org/llama.cpp/issues/3018,
      https://github.com/ggml-org/llama.cpp/issues/2376 (the GQA permutation: gibberish)
    - https://github.com/karpathy/llama2.c/issues/286 (degenerates after ~20 tokens)
    - https://github.com/huggingface/transformers/issues/31766, https://github.com/huggingface/transformers/issues/31788
      (GGUF to HF must undo it with `num_key_value_heads`)
    """

    code = "PK410"
    name = "qk-rows-not-permuted"
    severity = "error"
    effect = "silent"
    fix_title = "Re-convert with llama.cpp's convert_hf_to_gguf.py (it permutes Q/K rows)"
    probe_kind = "numeric"
    needs = ("gguf", "safetensors")

    def check(self, ctx: Context) -> Iterable[Finding]:
        st = ctx.facts.safetensors
        if st is None or not ctx.ggufs:
            return
        for g, v in self.each(ctx):
            if not v.head_count or not v.head_dim:
                continue
            for hf, gg, _heads in (
                ("model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight", v.head_count),
                ("model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight", v.head_count_kv or v.head_count),
            ):
                verdict = _compare_first_head(st, g, hf, gg, v.head_dim)
                if verdict is None:
                    continue
                permuted, e_perm, e_plain = verdict
                if permuted == v.rope_is_neox:
                    want = "as written (NEOX pairing)" if v.rope_is_neox else "permuted for interleaved pairing"
                    got = "permuted" if permuted else "as in the HF checkpoint"
                    yield self.file_finding(
                        ctx,
                        g,
                        f"`{gg}` rows are {got} (relative error {min(e_perm, e_plain):.2g} vs "
                        f"{max(e_perm, e_plain):.2g}); "
                        f"candle {ctx.target.candle} pairs `{v.architecture or 'llama'}` RoPE "
                        f"{'NEOX' if v.rope_is_neox else 'interleaved'} and needs them {want}",
                        transformers_value="rotate_half on HF rows",
                        candle_value="rope" if v.rope_is_neox else "rope_i",
                        # verify rewrites a copy with llama.cpp's permutation (unpermuting has no probe yet)
                        probe_patch=None if v.rope_is_neox else {PERMUTE_QK: True},
                    )
                    break


def _decode_hf(raw: bytes, dtype: str):
    import numpy as np

    if dtype == "F32":
        return np.frombuffer(raw, "<f4").astype(np.float64)
    if dtype == "F16":
        return np.frombuffer(raw, "<f2").astype(np.float64)
    if dtype == "BF16":
        u = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64)
    return None


def _compare_first_head(st, g: GgufFile, hf_name: str, gg_name: str, hd: int):
    """(permuted?, err_if_permuted, err_if_plain) for the first head, or None if undecidable."""
    import numpy as np

    t = st.tensors.get(hf_name)
    q = g.tensors.get(gg_name)
    if t is None or q is None or len(t.shape) != 2 or len(q.shape) != 2 or t.shape != q.shape or hd % 2:
        return None
    rows, cols = t.shape
    if rows < hd:
        return None
    n = hd * cols
    esize = {"F32": 4, "F16": 2, "BF16": 2}.get(t.dtype)
    if esize is None:
        return None
    from portkit.model.gguf_header import GGML_TYPES

    info = GGML_TYPES.get(q.type_id)
    if info is None or cols % info[1]:
        return None
    try:
        with open(t.file, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
            f.seek(8 + header_len + t.data_offsets[0])
            hf_raw = f.read(n * esize)
        with open(g.path, "rb") as f:
            f.seek(g.data_offset + q.offset)
            g_raw = f.read(n // info[1] * info[2])
    except OSError:
        return None
    w = _decode_hf(hf_raw, t.dtype)
    if w is None or w.size != n:
        return None
    w = w.reshape(hd, cols)
    if q.type_id == 0:
        d = np.frombuffer(g_raw, "<f4").astype(np.float64)
    elif q.type_id == 1:
        d = np.frombuffer(g_raw, "<f2").astype(np.float64)
    else:
        try:
            import gguf.quants  # lazy: numpy-only, never torch

            qtype = gguf.GGMLQuantizationType(q.type_id)
            d = gguf.quants.dequantize(np.frombuffer(g_raw, np.uint8), qtype).astype(np.float64).ravel()
        except Exception:
            return None
    if d.size != n:
        return None
    d = d.reshape(hd, cols)
    perm = w.reshape(2, hd // 2, cols).swapaxes(0, 1).reshape(hd, cols)
    scale = float(np.max(np.abs(w)))
    if scale == 0 or not np.isfinite(scale) or np.array_equal(perm, w):
        return None
    e_perm = float(np.max(np.abs(d - perm))) / scale
    e_plain = float(np.max(np.abs(d - w))) / scale
    lo, hi = min(e_perm, e_plain), max(e_perm, e_plain)
    if hi < 4 * lo + 1e-6 or lo > 0.5:
        return None  # not clearly one layout (or not the same weights at all)
    return (e_perm < e_plain, e_perm, e_plain)


class MissingGgufTensor(GgufRule):
    """A tensor the file's candle GGUF loader loads is not in the GGUF.

    ## What it does
    For quantized_llama checks `token_embd.weight`, `output_norm.weight` and the nine tensors of
    every block `blk.0` .. `blk.{block_count - 1}` (`output.weight` may be absent: candle then
    reuses the embedding; a MoE file's per-expert tensors are PK419's). For quantized_qwen2,
    quantized_qwen3, quantized_gemma3 and quantized_phi3 checks each loader's own list (q/k
    norms, gemma3's four norms, phi3's fused tensors) and names the first one missing in load
    order, except qwen2's q/k/v biases (PK418) and phi3's `output.weight` (PK417).

    ## Why is this bad?
    `from_gguf` fails at load (`cannot find tensor info for blk.2.attn_q.weight`), typically
    when `llama.block_count` disagrees with the blocks written, or a converter renamed
    tensors.

    ## Example
    `llama.block_count = 3` in a file with `blk.0` and `blk.1` only.

    ## Fix
    None in config.json; re-convert the GGUF.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:433-488; quantized_qwen2.rs:205-252;
    quantized_qwen3.rs:403-427, :492-517; quantized_gemma3.rs:318-378; quantized_phi3.rs:248-283;
    candle-core-0.11.0/src/quantized/gguf_file.rs:569-580.

    ## Verification
    crash: candle's `from_gguf` must fail with the same message.

    ## References
    - https://github.com/mozilla-ai/llamafile/issues/516, https://github.com/ggml-org/llama.cpp/issues/10759 (tensor
      count mismatches)
    """

    code = "PK411"
    name = "missing-gguf-tensor"
    severity = "error"
    effect = "load-error"
    fix_title = "Re-convert the GGUF with every tensor its loader reads (every block `block_count` announces)"
    probe_kind = "crash"
    loaders = ALL_LOADERS

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
            if v.loader != "quantized_llama":
                yield from self._family_loader(ctx, g, v.loader)
                continue
            if v.merged_experts and v.expert_count > 1:
                continue  # PK419 says why the per-expert tensors are missing
            if v.refused and v.refused.startswith("cannot find tensor info for "):
                blocks = sorted(
                    {int(n.split(".")[1]) for n in g.tensors if n.startswith("blk.") and n.split(".")[1].isdigit()}
                )
                have = f"blocks {blocks[0]}-{blocks[-1]}" if blocks else "no blocks"
                yield self.file_finding(
                    ctx,
                    g,
                    f"candle {ctx.target.candle} fails at load with `{v.refused}` "
                    f"(`llama.block_count`={v.block_count}, the file has {have})",
                    candle_value=v.refused,
                    expect=v.refused,
                )

    def _family_loader(self, ctx: Context, g: GgufFile, loader: str) -> Iterable[Finding]:
        """A quantized_qwen2/qwen3/gemma3/phi3 file: the tensors its loader's list has and the file
        lacks, named from the first one it fails on."""
        required = loader_required_tensors(g, loader, ctx.target.candle)
        first = next((n for n in required if n not in g.tensors), None)
        if (
            first is None
            or (loader == "quantized_qwen2" and first.endswith(".bias"))
            or (loader == "quantized_phi3" and first == "output.weight")
            or (loader == "quantized_phi" and split_qkv(g, first))
        ):
            return  # none missing, or PK418's / PK417's / PK422's
        missing = [n for n in required if n not in g.tensors]
        err = missing_tensor_error(loader, first)
        shown = backticked(missing)
        prefix = metadata_prefix(g, loader, ctx.target.candle)
        yield self.file_finding(
            ctx,
            g,
            f"the GGUF has no {shown} (`{prefix}.block_count`={md_u32(g, f'{prefix}.block_count')}); candle "
            f"{ctx.target.candle}'s {loader} fails at load with `{err}`",
            candle_value=err,
            expect=err,
        )
