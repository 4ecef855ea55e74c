"""PK409: what a GGUF's metadata says against the config.json beside it, as candle 0.11.0 reads both."""

from __future__ import annotations

import struct

from portkit.errors import InputError
from portkit.rules.base import Context, f32, num
from portkit.rules.gguf.base import ALL_LOADERS, GgufRule
from portkit.semantics.gguf import GgufView, md_f32, md_u32, metadata_prefix
from portkit.semantics.transformers import llama3_inv_freq_factors

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding
    from portkit.model import GgufFile


class GgufConfigDisagreement(GgufRule):
    """GGUF hyper-parameters disagree with the config.json beside it.

    ## What it does
    With a config.json in the same directory, compares heads, kv heads, layers, hidden and
    intermediate sizes, context length, RMS epsilon, vocabulary, `llama.rope.freq_base` with
    transformers' effective `rope_theta`, and the `rope_freqs.weight` factors (or their
    absence) with what transformers computes from a llama3 `rope_parameters`. For
    quantized_qwen2, quantized_qwen3, quantized_gemma3 and quantized_phi3 files it compares the
    same sizes and epsilon under their own prefix with transformers' values for the config's
    family, and what each loader also reads: `rope.freq_base` (not phi3's, which candle ignores:
    PK415), `attention.key_length` with `head_dim` (qwen3, gemma3), gemma3's
    `attention.sliding_window` and `rope.local_freq_base`.

    ## Why is this bad?
    candle's quantized_llama trusts only the GGUF. A converter that read a transformers 5
    config with an old parser writes the wrong theta, drops the llama3 factors, or the GGUF
    was made from another revision: either way candle computes another model than
    transformers, silently.

    ## Example
    `llama.rope.freq_base = 10000` beside `rope_parameters.rope_theta = 500000`.

    ## Fix
    None in config.json; re-convert the GGUF from this config.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:384-394 (what it reads), :433
    (vocabulary from `token_embd.weight`); quantized_qwen2.rs:191-199; quantized_qwen3.rs:474-481;
    quantized_gemma3.rs:288-304; quantized_phi3.rs:235-243.

    ## Verification
    numeric: the GGUF runner's logits differ from transformers' beyond the quantization
    error.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (what a converter writes from config.json)
    - https://github.com/floneum/kalosm/issues/340 (GGUF files that lack the scaling config.json has)
    - https://github.com/ggml-org/llama.cpp/issues/18013 (older converters read only the top-level `rope_theta`)
    """

    code = "PK409"
    name = "gguf-config-disagreement"
    severity = "error"
    effect = "silent"
    fix_title = "Re-convert the GGUF from this config.json"
    probe_kind = "numeric"
    loaders = ALL_LOADERS

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not ctx.ggufs:
            return
        for g, v in self.each(ctx):
            if v.loader != "quantized_llama":
                yield from self._family_loader(ctx, g, v.loader)
        if not self.tv_ok(ctx):
            return
        ftv = ctx.ftv
        assert ftv is not None
        for g, v in self.each(ctx):
            if v.loader != "quantized_llama":
                continue
            pairs: list[tuple[str, object, str, object]] = [
                ("llama.attention.head_count", v.head_count, "num_attention_heads", ftv.get("num_attention_heads")),
                (
                    "llama.attention.head_count_kv",
                    v.head_count_kv,
                    "num_key_value_heads",
                    ftv.get("num_key_value_heads"),
                ),
                ("llama.block_count", v.block_count, "num_hidden_layers", ftv.get("num_hidden_layers")),
                ("llama.embedding_length", v.embedding_length, "hidden_size", ftv.get("hidden_size")),
                (
                    "llama.context_length",
                    v.context_length,
                    "max_position_embeddings",
                    ftv.get("max_position_embeddings"),
                ),
            ]
            ff = g.metadata.get("llama.feed_forward_length")
            if ff is not None and isinstance(ff.value, int):
                pairs.append(("llama.feed_forward_length", ff.value, "intermediate_size", ftv.get("intermediate_size")))
            emb = g.tensors.get("token_embd.weight")
            if emb is not None and len(emb.shape) == 2:
                pairs.append(("token_embd.weight rows", emb.shape[0], "vocab_size", ftv.get("vocab_size")))
            for gk, gval, ck, cval in pairs:
                if gval is not None and cval is not None and gval != cval:
                    yield self._disagreement(
                        ctx, g, f"`{gk}` is {gval}; config.json's `{ck}` (what transformers uses) is {cval}", cval, gval
                    )
            eps, theta = ftv.get("rms_norm_eps"), ftv.get("rope_theta")
            if v.rms_eps is not None and isinstance(eps, float) and f32(eps) != v.rms_eps:
                yield self._disagreement(
                    ctx,
                    g,
                    f"`llama.attention.layer_norm_rms_epsilon` is {num(v.rms_eps)}; transformers uses "
                    f"`rms_norm_eps`={num(eps)}",
                    eps,
                    v.rms_eps,
                )
            if v.freq_base_source == "metadata" and theta is not None and f32(theta) != v.freq_base:
                yield self._disagreement(
                    ctx,
                    g,
                    f"`llama.rope.freq_base` is {num(v.freq_base)}; transformers uses `rope_theta`={num(theta)}",
                    theta,
                    v.freq_base,
                    patch={"llama.rope.freq_base": theta},
                )
            yield from self._rope_freqs(ctx, g, v)

    def _family_loader(self, ctx: Context, g: GgufFile, loader: str) -> Iterable[Finding]:
        """A file of one of the other loaders against transformers' values for a config of the same
        family, on the keys that loader reads (phi3's and phi's ignored bases are PK415's and PK423's)."""
        ftv, p = ctx.ftv, metadata_prefix(g, loader, ctx.target.candle)
        if ftv is None or ctx.family is None or ctx.family.gguf_loader != loader:
            return
        keys = [
            ("attention.head_count", "num_attention_heads"),
            ("attention.head_count_kv", "num_key_value_heads"),
            ("block_count", "num_hidden_layers"),
            ("embedding_length", "hidden_size"),
        ]
        # quantized_phi sizes its MLP from the tensors and its RoPE table is 4096 rows, gemma3's too
        # (llama.cpp writes phi2's feed_forward_length as 4 x hidden, whatever intermediate_size says)
        if loader != "quantized_phi":
            keys.append(("feed_forward_length", "intermediate_size"))
        if loader not in ("quantized_gemma3", "quantized_phi"):
            keys.append(("context_length", "max_position_embeddings"))
        if loader in ("quantized_qwen3", "quantized_gemma3", "quantized_glm4"):
            keys.append(("attention.key_length", "head_dim"))
        if loader == "quantized_gemma3":
            keys.append(("attention.sliding_window", "sliding_window"))
        for suffix, ck in keys:
            gval, cval = md_u32(g, f"{p}.{suffix}"), ftv.get(ck)
            if gval is not None and isinstance(cval, int) and gval != cval:
                yield self._disagreement(
                    ctx,
                    g,
                    f"`{p}.{suffix}` is {gval}; config.json's `{ck}` (what transformers uses) is {cval}",
                    cval,
                    gval,
                )
        emb = g.tensors.get("token_embd.weight")
        vocab = ftv.get("vocab_size")
        if emb is not None and len(emb.shape) == 2 and isinstance(vocab, int) and emb.shape[0] != vocab:
            yield self._disagreement(
                ctx,
                g,
                f"`token_embd.weight rows` is {emb.shape[0]}; config.json's `vocab_size` is {vocab}",
                vocab,
                emb.shape[0],
            )
        # quantized_phi's LayerNorms read a LayerNorm epsilon (quantized_phi.rs:218)
        eps_key, eps_field = (
            ("attention.layer_norm_epsilon", "layer_norm_eps")
            if loader == "quantized_phi"
            else ("attention.layer_norm_rms_epsilon", "rms_norm_eps")
        )
        eps, want = md_f32(g, f"{p}.{eps_key}"), ftv.get(eps_field)
        if eps is not None and isinstance(want, float) and f32(want) != eps:
            yield self._disagreement(
                ctx, g, f"`{p}.{eps_key}` is {num(eps)}; transformers uses `{eps_field}`={num(want)}", want, eps
            )
        # phi3's and phi's bases are hard-coded (PK415, PK423)
        thetas = [] if loader in ("quantized_phi3", "quantized_phi") else [("rope.freq_base", "rope_theta")]
        if loader == "quantized_gemma3":  # the local base only when written: its absence is PK414's
            thetas.append(("rope.local_freq_base", "rope_local_base_freq"))
        for suffix, ck in thetas:
            fb, theta = md_f32(g, f"{p}.{suffix}"), ftv.get(ck)
            if fb is not None and isinstance(theta, (int, float)) and f32(float(theta)) != fb:
                yield self._disagreement(
                    ctx,
                    g,
                    f"`{p}.{suffix}` is {fb:.7g}; transformers uses `{ck}`={num(theta)}",
                    theta,
                    fb,
                    patch={f"{p}.{suffix}": float(theta)},
                )

    def _disagreement(
        self, ctx: Context, g: GgufFile, msg: str, tval: object, cval: object, patch: dict[str, object] | None = None
    ) -> Finding:
        """`patch`: the metadata edit that makes candle read what transformers uses, when one exists."""
        return self.file_finding(
            ctx,
            g,
            msg + f"; candle {ctx.target.candle} reads only the GGUF",
            transformers_value=tval,
            candle_value=cval,
            probe_patch=patch,
        )

    def _rope_freqs(self, ctx: Context, g: GgufFile, v: GgufView) -> Iterable[Finding]:
        ftv = ctx.ftv
        assert ftv is not None
        want = llama3_inv_freq_factors(ftv)
        t = g.tensors.get("rope_freqs.weight")
        if want is None:
            if t is not None:
                yield self._disagreement(
                    ctx,
                    g,
                    f"the GGUF has `rope_freqs.weight` but transformers applies `{ftv.rope_type}` rope, not llama3",
                    ftv.rope_type,
                    "rope_freqs",
                )
            return
        if t is None:
            yield self._disagreement(
                ctx,
                g,
                "transformers applies llama3 rope scaling; the GGUF has no `rope_freqs.weight` (the converter dropped "
                "the scaling)",
                "llama3",
                None,
            )
            return
        if t.type_id != 0 or t.numel != len(want):
            yield self._disagreement(
                ctx,
                g,
                f"`rope_freqs.weight` has {t.numel} {t.type_name} values; transformers' llama3 scaling has {len(want)} "
                "factors",
                len(want),
                t.numel,
            )
            return
        from portkit.model.gguf_header import read_tensor_bytes

        try:
            raw = read_tensor_bytes(g, t, limit=1 << 20)
        except InputError:
            return
        got = struct.unpack(f"<{len(want)}f", raw)
        worst = max(range(len(want)), key=lambda i: abs(got[i] - want[i]) / max(abs(want[i]), 1e-12))
        if abs(got[worst] - want[worst]) > 1e-3 * max(abs(want[worst]), 1.0):
            yield self._disagreement(
                ctx,
                g,
                f"`rope_freqs.weight`[{worst}] is {got[worst]:.6g}; transformers' llama3 `rope_parameters` give "
                f"{want[worst]:.6g}",
                want[worst],
                got[worst],
            )
