"""One triggering and one clean model directory per rule code, built with fixtures.skeleton.

Each builder writes into `root` and returns (model_dir, target kwargs). Kept separate from the
test module so the oracle test can reuse the configs and the bad-input tests the builders.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fixtures import skeleton as sk
from tests.unit.family_configs import LEGACY, T5

Builder = Callable[[Path], tuple[Path, dict[str, Any]]]


def healthy(root: Path, **cfg: Any) -> Path:
    return sk.write_model(root, sk.config("tf4", **cfg))


def model(cfg: dict[str, Any], **kw: Any) -> Builder:
    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        return sk.write_model(root, cfg, **kw), {}

    return b


def with_target(b: Builder, **target: Any) -> Builder:
    def w(root: Path) -> tuple[Path, dict[str, Any]]:
        d, t = b(root)
        return d, {**t, **target}

    w.family = getattr(b, "family", "llama")  # type: ignore[attr-defined]
    w.device = target.get("device", getattr(b, "device", "cpu"))  # type: ignore[attr-defined]
    w.candle = target.get("candle", getattr(b, "candle", None))  # type: ignore[attr-defined]
    return w


def raw_config(text: str, tensors_from: dict[str, Any]) -> Builder:
    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        sk.write_model(root, tensors_from)
        (root / "config.json").write_text(text)
        return root, {}

    return b


def gguf_model(
    *,
    cfg: dict[str, Any] | None = None,
    md: dict[str, Any] | None = None,
    drop_md: tuple[str, ...] = (),
    tensor_types: dict[str, str] | None = None,
    rope_freqs: bool = False,
    with_config: bool = True,
    arch: str = "llama",
    rope_freqs_values: list[float] | None = None,
) -> Builder:
    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        c = cfg or sk.config("tf4")
        root.mkdir(parents=True, exist_ok=True)
        if with_config:
            sk.write_json(root / "config.json", c)
        meta = sk.llama_metadata(c, arch="llama", drop=drop_md)
        meta["general.architecture"] = arch
        meta.update(md or {})
        tensors = sk.gguf_tensors(c, "Q8_0", rope_freqs=rope_freqs or rope_freqs_values is not None)
        for name, qt in (tensor_types or {}).items():
            tensors[name] = (qt, tensors[name][1])
        data = {}
        if rope_freqs_values is not None:
            data["rope_freqs.weight"] = struct.pack(f"<{len(rope_freqs_values)}f", *rope_freqs_values)
        sk.write_gguf(root / "model-q8_0.gguf", meta, tensors, data=data)
        return root, {}

    return b


def family_config(family: str, **overrides: Any) -> dict[str, Any]:
    """The family's tiny legacy config.json (tests/unit/family_configs.py), mixtral made parseable."""
    from tests.unit.family_configs import LEGACY

    base = dict(LEGACY[family])
    if family == "mixtral":
        base.update(sliding_window=128, use_flash_attn=False)
    return {**base, **overrides}


def family_tensors(cfg: dict[str, Any], available: frozenset[str] | None = None) -> dict[str, tuple[int, ...]]:
    """What the family's candle module reads for `cfg` (the table tests/native/test_family_weights_oracle.py
    holds to candle): a checkpoint candle loads exactly. `available` answers qwen2's `lm_head.weight`
    probe; by default the file has one when the config is untied, as transformers saves it."""
    import importlib

    if available is None:
        available = frozenset() if cfg.get("tie_word_embeddings") else frozenset({"lm_head.weight"})

    from portkit.families import detect

    fam = detect(cfg)
    assert fam is not None
    view = fam.view(cfg)
    assert view.ok, view.refused
    return importlib.import_module(f"portkit.families.{fam.name}").expected_tensors(view.values, available)


def family_model(
    family: str,
    *,
    cfg: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    extra: dict[str, tuple[int, ...]] | None = None,
    tensors: dict[str, tuple[int, ...]] | None = None,
    **overrides: Any,
) -> Builder:
    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        c = cfg or family_config(family, **overrides)
        return sk.write_model(root, c, tensors=tensors or family_tensors(c), drop=drop, extra=extra), {}

    return b


# Tiny metadata and tensors per candle GGUF loader, as llama.cpp's converter writes them (convert_hf_to_gguf.py).
_LOADER_META: dict[str, dict[str, Any]] = {
    "qwen2": {"context_length": 128, "rope.freq_base": 1e6},
    "qwen3": {"context_length": 128, "rope.freq_base": 1e6, "attention.key_length": 16, "attention.value_length": 16},
    "gemma3": {
        "context_length": 128,
        "rope.freq_base": 1e6,
        "attention.key_length": 16,
        "attention.value_length": 16,
        "attention.sliding_window": 32,
    },
    "phi3": {"context_length": 128, "rope.dimension_count": 16, "feed_forward_length": 128},
    # phi-2's first layout: every head in K and V, a LayerNorm epsilon (Phi2Model.set_gguf_parameters)
    "phi2": {"context_length": 128, "rope.dimension_count": 6, "attention.head_count_kv": 4},
    "glm4": {
        "context_length": 128,
        "rope.freq_base": 1e4,
        "attention.key_length": 16,
        "attention.value_length": 16,
        "rope.dimension_count": 8,
    },
    # quantized_smollm3 reads 128-wide heads only (PK426): two of them, over a 64-wide embedding
    "smollm3": {
        "context_length": 128,
        "rope.freq_base": 5e6,
        "vocab_size": 256,
        "feed_forward_length": 128,
        "rope.dimension_count": 128,
        "attention.head_count": 2,
    },
}
# the 2-D weights of each block of a smollm3 skeleton, Q8_0 where PK429 should not speak
SMOLLM3_Q8_0 = {
    **{f"blk.{i}.attn_{x}.weight": ("Q8_0", (64, 256)) for i in range(2) for x in "qk"},
    "token_embd.weight": ("Q8_0", (64, 256)),
}


def loader_gguf(
    arch: str,
    *,
    md: dict[str, Any] | None = None,
    drop_md: tuple[str, ...] = (),
    drop: tuple[str, ...] = (),
    extra: dict[str, tuple[str, tuple[int, ...]]] | None = None,
) -> Builder:
    """A GGUF for candle's loader of `arch` (qwen2, qwen3, gemma3, phi3, phi2, glm4, smollm3): F32, sparse data."""

    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        h, inter, vocab, kvd = 64, 128, 256, 32
        meta: dict[str, Any] = {
            "general.architecture": arch,
            f"{arch}.block_count": 2,
            f"{arch}.embedding_length": h,
            f"{arch}.attention.head_count": 4,
            f"{arch}.attention.head_count_kv": 2,
            f"{arch}.attention.layer_norm_{'' if arch == 'phi2' else 'rms_'}epsilon": 1e-6,
            **{f"{arch}.{k}": v for k, v in _LOADER_META[arch].items()},
        }
        meta.update(md or {})
        for k in drop_md:
            meta.pop(k, None)
        t: dict[str, tuple[str, tuple[int, ...]]] = {
            "token_embd.weight": ("F32", (h, vocab)),
            "output_norm.weight": ("F32", (h,)),
        }
        if arch == "phi2":  # quantized_phi: every linear and norm with a bias, `output` required
            t.update(
                {
                    "output_norm.bias": ("F32", (h,)),
                    "output.weight": ("F32", (h, vocab)),
                    "output.bias": ("F32", (vocab,)),
                }
            )
        for i in range(2):
            p = f"blk.{i}."
            if arch == "phi2":
                for n, shape in (
                    ("attn_norm", (h,)),
                    ("attn_qkv", (h, 3 * h)),
                    ("attn_output", (h, h)),
                    ("ffn_up", (h, inter)),
                    ("ffn_down", (inter, h)),
                ):
                    t[p + n + ".weight"] = ("F32", shape)
                    t[p + n + ".bias"] = ("F32", (shape[-1],))
                continue
            if arch == "smollm3":  # two heads of 128
                for n, shape in (
                    ("attn_q", (h, 256)),
                    ("attn_k", (h, 256)),
                    ("attn_v", (h, 256)),
                    ("attn_output", (256, h)),
                ):
                    t[p + n + ".weight"] = ("F32", shape)
                for n, shape in (("ffn_gate", (h, inter)), ("ffn_up", (h, inter)), ("ffn_down", (inter, h))):
                    t[p + n + ".weight"] = ("F32", shape)
                t[p + "attn_norm.weight"] = ("F32", (h,))
                t[p + "ffn_norm.weight"] = ("F32", (h,))
                continue
            t[p + "attn_norm.weight"] = ("F32", (h,))
            t[p + "ffn_norm.weight"] = ("F32", (h,))
            t[p + "attn_output.weight"] = ("F32", (h, h))
            t[p + "ffn_down.weight"] = ("F32", (inter, h))
            if arch == "phi3":
                t[p + "attn_qkv.weight"] = ("F32", (h, h + 2 * kvd))
                t[p + "ffn_up.weight"] = ("F32", (h, 2 * inter))
                continue
            t[p + "attn_q.weight"] = ("F32", (h, h))
            t[p + "attn_k.weight"] = ("F32", (h, kvd))
            t[p + "attn_v.weight"] = ("F32", (h, kvd))
            if arch == "glm4":  # the fused gate_up as one ffn_up, four norms, q/k/v biases
                t[p + "ffn_up.weight"] = ("F32", (h, 2 * inter))
                for n in ("post_attention_norm", "post_ffw_norm"):
                    t[p + n + ".weight"] = ("F32", (h,))
                for n, width in (("attn_q", h), ("attn_k", kvd), ("attn_v", kvd)):
                    t[p + n + ".bias"] = ("F32", (width,))
                continue
            t[p + "ffn_gate.weight"] = ("F32", (h, inter))
            t[p + "ffn_up.weight"] = ("F32", (h, inter))
            if arch == "qwen2":
                t[p + "attn_q.bias"] = ("F32", (h,))
                t[p + "attn_k.bias"] = ("F32", (kvd,))
                t[p + "attn_v.bias"] = ("F32", (kvd,))
            if arch in ("qwen3", "gemma3"):
                t[p + "attn_q_norm.weight"] = ("F32", (16,))
                t[p + "attn_k_norm.weight"] = ("F32", (16,))
            if arch == "gemma3":
                t[p + "post_attention_norm.weight"] = ("F32", (h,))
                t[p + "post_ffw_norm.weight"] = ("F32", (h,))
        if arch in ("qwen2", "phi3"):
            t["output.weight"] = ("F32", (h, vocab))
        for n in drop:
            t.pop(n, None)
        t.update(extra or {})
        root.mkdir(parents=True, exist_ok=True)
        sk.write_gguf(root / f"model-{arch}-f32.gguf", meta, t)
        return root, {}

    return b


def beside_config(b: Builder, family: str, **overrides: Any) -> Builder:
    """`b`'s GGUF with the family's tiny config.json next to it."""

    def w(root: Path) -> tuple[Path, dict[str, Any]]:
        d, t = b(root)
        sk.write_json(d / "config.json", family_config(family, **overrides))
        return d, t

    return w


def mixtral_gguf(merged: bool) -> Builder:
    """A quantized_llama MoE GGUF (2 experts): merged `*_exps` tensors as llama.cpp writes Mixtral, or per expert."""

    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        c = sk.config("tf4")
        meta = {**sk.llama_metadata(c), "llama.expert_count": 2, "llama.expert_used_count": 2}
        t = sk.gguf_tensors(c, "F32")
        for i in range(c["num_hidden_layers"]):
            p = f"blk.{i}."
            dims = {w: t.pop(f"{p}ffn_{w}.weight")[1] for w in ("gate", "up", "down")}
            t[p + "ffn_gate_inp.weight"] = ("F32", (64, 2))
            for w, d in dims.items():
                if merged:
                    t[f"{p}ffn_{w}_exps.weight"] = ("F32", (*d, 2))
                else:
                    for e in range(2):
                        t[f"{p}ffn_{w}.{e}.weight"] = ("F32", d)
        root.mkdir(parents=True, exist_ok=True)
        sk.write_gguf(root / "mixtral-f32.gguf", meta, t)
        return root, {}

    return b


def qk_pair(permuted: bool) -> Builder:
    """HF safetensors with real layer-0 q/k rows beside an F32 GGUF holding them permuted or not."""

    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        c = sk.config("tf4")
        rng = np.random.default_rng(0)
        q = rng.standard_normal((64, 64)).astype(np.float32)
        k = rng.standard_normal((32, 64)).astype(np.float32)
        sk.write_model(
            root, c, data={"model.layers.0.self_attn.q_proj.weight": q, "model.layers.0.self_attn.k_proj.weight": k}
        )
        gq = sk.permute_qk(q, 4) if permuted else q
        gk = sk.permute_qk(k, 2) if permuted else k
        sk.write_gguf(
            root / "model-f32.gguf",
            sk.llama_metadata(c),
            sk.gguf_tensors(c, "F32"),
            data={"blk.0.attn_q.weight": gq.tobytes(), "blk.0.attn_k.weight": gk.tobytes()},
        )
        return root, {}

    return b


def _dup_key_config() -> str:
    c = sk.config("tf4")
    text = json.dumps(c, indent=2)
    return text.replace('"rope_theta": 100000.0', '"rope_theta": 100000.0,\n  "rope_theta": 100000.0')


def _llama3_factors() -> list[float]:
    from portkit.semantics import family_transformers_view
    from portkit.semantics.transformers import llama3_inv_freq_factors

    c = sk.config("tf4", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)
    return llama3_inv_freq_factors(family_transformers_view("llama", c)) or []


def family(name: str, layout: str = "legacy", drop: tuple[str, ...] = (), **edits: Any) -> Builder:
    """A config-only model directory of family `name` (tests/unit/family_configs.py) with `edits`."""
    base = (LEGACY if layout == "legacy" else T5)[name]
    cfg = {k: v for k, v in {**base, **edits}.items() if k not in drop}

    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        return sk.write_model(root, cfg, weights=False), {}

    b.family = name  # type: ignore[attr-defined]  # llama-only native probes skip the others
    return b


OTHER_FAMILIES = sorted(n for n in LEGACY if n != "llama")
# a legacy config candle reads as transformers does (mixtral's hub config has `sliding_window: null`)
CLEAN = {n: family(n) for n in LEGACY} | {"mixtral": family("mixtral", sliding_window=128, use_flash_attn=False)}
# the key candle's module refuses first in each family's transformers 5 save
T5_MISSING = {n: "rope_theta" for n in OTHER_FAMILIES} | {"stable_lm": "partial_rotary_factor"}
T5_MISSING.pop("granite")  # granite's rope_theta has a serde default: PK101
T5_MISSING.pop("gemma4")  # gemma4's too (1e6); its transformers-5 save is refused at load instead: PK127
TF4 = sk.config("tf4")
CASES: dict[str, tuple[Builder, Builder]] = {
    "PK101": (model(sk.config("tf5")), model(TF4)),
    "PK102": (model(sk.config("tf5", scaling=sk.LLAMA3_SCALING)), model(sk.config("tf4", scaling=sk.LLAMA3_SCALING))),
    "PK103": (
        model(sk.config("tf4", rope_scaling={"type": "linear", "factor": 2.0})),
        model(sk.config("tf4", scaling=sk.LLAMA3_SCALING)),
    ),
    "PK104": (model(sk.config("tf4", head_dim=32)), model(sk.config("tf4", head_dim=16))),
    "PK105": (model(sk.config("tf4", attention_bias=True)), model(TF4)),
    "PK106": (model(sk.config("tf4", mlp_bias=True)), model(TF4)),
    "PK107": (model(sk.config("tf4", hidden_act="gelu")), model(sk.config("tf4", hidden_act="swish"))),
    "PK108": (
        # llama's transformers rotary honours the factor only for a scaled rope type
        model(sk.config("tf4", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING, partial_rotary_factor=0.5)),
        model(sk.config("tf4", partial_rotary_factor=0.5)),
    ),
    "PK109": (
        model(sk.config("tf4", sliding_window=4096, layer_types=["sliding_attention", "full_attention"])),
        model(sk.config("tf4", sliding_window=None)),
    ),
    "PK110": (model(sk.config("tf4", max_position_embeddings=sk.DROP)), model(TF4)),
    "PK111": (
        model(TF4, generation_config={"eos_token_id": [2, 3]}),
        model(TF4, generation_config={"eos_token_id": 2}),
    ),
    "PK112": (raw_config(_dup_key_config(), TF4), model(TF4)),
    "PK114": (model({**TF4, "model_type": "falcon_mamba"}, weights=False), CLEAN["qwen2"]),
    "PK115": (family("mistral", sliding_window=4), CLEAN["mistral"]),
    "PK116": (family("gemma", hidden_act="gelu"), CLEAN["gemma"]),
    "PK117": (family("gemma", hidden_activation="gelu_pytorch_tanh"), CLEAN["gemma"]),
    "PK118": (family("gemma2", query_pre_attn_scalar=24), CLEAN["gemma2"]),
    "PK119": (family("granite", embedding_multiplier=12.0), CLEAN["granite"]),
    "PK120": (family("granite", tie_word_embeddings=True), CLEAN["granite"]),
    "PK121": (CLEAN["gemma3"], family("gemma3", num_key_value_heads=1)),
    "PK122": (
        family("gemma3", num_key_value_heads=1, use_bidirectional_attention=True),
        family("gemma3", num_key_value_heads=1),
    ),
    "PK123": (family("gemma2", drop=("final_logit_softcapping",)), CLEAN["gemma2"]),
    "PK201": (model(TF4, drop=["model.layers.1.mlp.up_proj.weight"]), model(TF4)),
    # a bias transformers adds and candle drops (the numeric probe's case; a bias neither reads is a variant)
    "PK202": (
        model(sk.config("tf4", attention_bias=True), extra={"model.layers.0.self_attn.q_proj.bias": (64,)}),
        model(TF4),
    ),
    "PK203": (model(TF4, extra={"language_model.model.norm.weight": (64,)}), model(TF4)),
    "PK204": (model(TF4, tensors=sk.hf_tensors(TF4, layers=1)), model(TF4)),
    "PK205": (model(TF4, drop=["lm_head.weight"]), model(sk.config("tf4", tie_word_embeddings=True))),
    "PK206": (
        model(sk.config("tf4", num_key_value_heads=sk.DROP), tensors=sk.hf_tensors(TF4)),
        model(TF4),
    ),
    "PK207": (model(TF4, tensors={**sk.hf_tensors(TF4)}, dtype="I8"), model(TF4)),
    "PK301": (with_target(model(TF4), dtype="bf16", candle="0.11.0"), with_target(model(TF4), candle="0.11.0")),
    "PK302": (
        with_target(model(TF4), dtype="f16", features=frozenset({"accelerate"})),
        with_target(model(TF4), dtype="f16"),
    ),
    "PK303": (with_target(model(TF4), dtype="f16"), with_target(model(TF4), dtype="f16", device="cuda")),
    "PK304": (with_target(model(TF4), dtype="bf16", device="cuda"), model(TF4)),
    "PK305": (
        with_target(model(TF4), use_flash_attn=True, device="cuda"),
        with_target(model(TF4), use_flash_attn=True, device="cuda", features=frozenset({"flash-attn", "cuda"})),
    ),
    "PK306": (with_target(model(TF4), max_tokens=200), with_target(model(TF4), max_tokens=128)),
    "PK307": (
        with_target(family("gemma2"), use_flash_attn=True, device="cuda", features=frozenset({"flash-attn", "cuda"})),
        with_target(
            family("gemma2", attn_logit_softcapping=None),
            use_flash_attn=True,
            device="cuda",
            features=frozenset({"flash-attn", "cuda"}),
        ),
    ),
    "PK308": (with_target(CLEAN["mixtral"], dtype="f16"), CLEAN["mixtral"]),
    # f16 holds positions exactly up to 2048: 2050 tokens reach position 2049, 2049 tokens do not
    "PK317": (
        with_target(family("qwen2", max_position_embeddings=4096), dtype="f16", max_tokens=2050),
        with_target(family("qwen2", max_position_embeddings=4096), dtype="f16", max_tokens=2049),
    ),
    # a second turn and a batch (portkit/rules/runtime_paths.py): the target, then its twin
    "PK309": (with_target(CLEAN["qwen2"], dtype="f16", turns=2), with_target(CLEAN["qwen2"], turns=2)),
    "PK310": (
        with_target(CLEAN["gemma3"], turns=2, max_tokens=33),
        with_target(CLEAN["gemma3"], turns=2, max_tokens=32),
    ),
    "PK311": (
        with_target(CLEAN["qwen3"], batch=2, device="cuda", candle="0.11.0"),
        with_target(CLEAN["qwen3"], batch=2, candle="0.11.0"),
    ),
    "PK312": (with_target(CLEAN["qwen2"], batch=2), CLEAN["qwen2"]),
    "PK313": (with_target(loader_gguf("qwen3"), batch=2), loader_gguf("qwen3")),
    "PK314": (with_target(loader_gguf("qwen3"), turns=2), with_target(loader_gguf("qwen3"), turns=2, device="cuda")),
    "PK315": (with_target(loader_gguf("gemma3"), turns=2), loader_gguf("gemma3")),
    "PK316": (with_target(loader_gguf("gemma3"), batch=2), with_target(loader_gguf("gemma3"), turns=1)),
    "PK401": (gguf_model(drop_md=("llama.block_count",)), gguf_model()),
    "PK402": (
        gguf_model(drop_md=("llama.rope.freq_base",)),
        gguf_model(),
    ),
    "PK403": (gguf_model(arch="gemma2"), gguf_model()),
    "PK404": (gguf_model(rope_freqs=True, with_config=False), gguf_model(with_config=False)),
    "PK405": (
        gguf_model(md={"llama.context_length": 8192}, with_config=False),
        gguf_model(md={"llama.context_length": 4096}, with_config=False),
    ),
    # Tensors laid out for head_dim 32 (MiniCPM-like, candle#3917) vs metadata alone saying 32:
    # candle never reads key_length and runs the second file as its tensors say.
    "PK406": (
        gguf_model(cfg=sk.config("tf4", head_dim=32), md={"llama.attention.key_length": 32}),
        gguf_model(md={"llama.attention.key_length": 32}),
    ),
    "PK407": (gguf_model(arch="olmo2", with_config=False), loader_gguf("qwen2")),
    "PK408": (gguf_model(tensor_types={"blk.0.attn_q.weight": "IQ2_XXS"}), gguf_model()),
    "PK409": (gguf_model(md={"llama.context_length": 256}), gguf_model()),
    "PK410": (qk_pair(permuted=False), qk_pair(permuted=True)),
    "PK411": (gguf_model(md={"llama.block_count": 3}, with_config=False), gguf_model(with_config=False)),
    "PK412": (loader_gguf("qwen3"), loader_gguf("qwen3", md={"general.dtype": 0})),
    "PK413": (loader_gguf("gemma3"), loader_gguf("qwen3")),
    "PK414": (
        loader_gguf("gemma3", md={"gemma3.rope.freq_base_swa": 50000.0}),
        loader_gguf("gemma3", md={"gemma3.rope.freq_base_swa": 10000.0}),
    ),
    "PK415": (
        loader_gguf("phi3", md={"phi3.rope.freq_base": 1e6}),
        loader_gguf("phi3", md={"phi3.rope.freq_base": 10000.0}),
    ),
    "PK416": (
        loader_gguf(
            "phi3", extra={"rope_factors_long.weight": ("F32", (8,)), "rope_factors_short.weight": ("F32", (8,))}
        ),
        loader_gguf("phi3"),
    ),
    "PK417": (loader_gguf("phi3", drop=("output.weight",)), loader_gguf("phi3")),
    "PK418": (loader_gguf("qwen2", drop=("blk.1.attn_k.bias",)), loader_gguf("qwen2")),
    "PK419": (mixtral_gguf(merged=True), mixtral_gguf(merged=False)),
    "PK420": (loader_gguf("phi3", md={"phi3.rope.dimension_count": 12}), loader_gguf("phi3")),
    # 2 blocks: with sliding_window_type 6 (the default) both slide, with type 1 none does
    "PK421": (loader_gguf("gemma3"), loader_gguf("gemma3", md={"gemma3.attention.sliding_window_type": 1})),
    # attn_q/attn_k/attn_v where quantized_phi reads one attn_qkv, as llama.cpp converts PhiForCausalLM today
    "PK422": (
        loader_gguf(
            "phi2",
            drop=tuple(f"blk.{i}.attn_qkv.{p}" for i in range(2) for p in ("weight", "bias")),
            extra={
                f"blk.{i}.attn_{x}.{p}": ("F32", (64, 64) if p == "weight" else (64,))
                for i in range(2)
                for x in "qkv"
                for p in ("weight", "bias")
            },
        ),
        loader_gguf("phi2"),
    ),
    "PK423": (beside_config(loader_gguf("phi2"), "phi"), beside_config(loader_gguf("phi2"), "phi", rope_theta=1e4)),
    # K and V with 2 of 4 heads in the fused projection: 128 rows where quantized_phi splits 192
    "PK424": (
        loader_gguf(
            "phi2",
            extra={
                **{f"blk.{i}.attn_qkv.weight": ("F32", (64, 128)) for i in range(2)},
                **{f"blk.{i}.attn_qkv.bias": ("F32", (128,)) for i in range(2)},
            },
        ),
        loader_gguf("phi2"),
    ),
    "PK425": (loader_gguf("glm4", md={"glm4.rope.dimension_count": 4}), loader_gguf("glm4")),
    # 4 heads of 16 (the tiny fixtures' shape): under 256 rows, no 128-row chunk at all
    "PK426": (
        loader_gguf(
            "smollm3",
            md={"smollm3.rope.dimension_count": 16, "smollm3.attention.head_count": 4},
            extra={
                **{f"blk.{i}.attn_{x}.weight": ("F32", (64, 64 if x == "q" else 32)) for i in range(2) for x in "qkv"},
                **{f"blk.{i}.attn_output.weight": ("F32", (64, 64)) for i in range(2)},
            },
        ),
        loader_gguf("smollm3"),
    ),
    "PK427": (
        beside_config(loader_gguf("smollm3"), "smollm3", num_hidden_layers=2),
        beside_config(loader_gguf("smollm3"), "smollm3", num_hidden_layers=2, no_rope_layers=[1, 1]),
    ),
    "PK428": (loader_gguf("smollm3", extra={"output.weight": ("F32", (64, 256))}), loader_gguf("smollm3")),
    "PK429": (loader_gguf("smollm3"), loader_gguf("smollm3", extra=SMOLLM3_Q8_0)),
}

# Extra triggering variants: (code, builder, substring the message must contain)
VARIANTS: list[tuple[str, Builder, str]] = [
    (
        "PK101",
        model(sk.config("tf4", rope_parameters={"rope_theta": 1e6, "rope_type": "default"})),
        "reads the top-level `rope_theta`=100000",
    ),
    ("PK102", model(sk.config("tf5", scaling={"rope_type": "linear", "factor": 2.0})), "no `linear` scaling"),
    (
        "PK103",
        model(
            sk.config(
                "tf4", rope_scaling={"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
            )
        ),
        "missing field",
    ),
    ("PK109", model(sk.config("tf4", sliding_window=4)), "`generate()` keeps a `sliding_window`=4 KV cache"),
    ("PK110", model(sk.config("tf4", rms_norm_eps=sk.DROP)), "`rms_norm_eps` to 1e-06"),
    ("PK112", model(sk.config("tf4", eos_token_id=-1)), "untagged enum LlamaEosToks"),
    ("PK112", model(sk.config("tf4", bos_token_id=2**32)), "expected u32"),
    ("PK201", model(TF4, drop=["model.norm.weight"]), "fails at load"),
    ("PK201", model(TF4, drop=["model.layers.1.mlp.up_proj.weight"]), "panics"),
    (
        "PK202",
        model(sk.config("tf4", tie_word_embeddings=True), tensors=sk.hf_tensors(TF4)),
        "`tie_word_embeddings` is true",
    ),
    ("PK202", model(TF4, tensors=sk.hf_tensors(sk.config("tf4", num_hidden_layers=3))), "past `num_hidden_layers`=2"),
    ("PK203", model(TF4, extra={"model.layers.0.self_attn.q_proj.qweight": (8, 64)}), "GPTQ"),
    ("PK204", model(TF4, tensors=sk.hf_tensors(sk.config("tf4", num_hidden_layers=3))), "both run only the first 2"),
    ("PK206", model(sk.config("tf4", head_dim=32)), "transformers expects the file's shape"),
    ("PK402", gguf_model(md={"llama.rope.freq_base": sk.typed("F64", 100000.0)}), "F64(100000.0)"),
    ("PK402", gguf_model(drop_md=("llama.rope.freq_base",), with_config=False), "check the source model"),
    ("PK401", gguf_model(md={"llama.block_count": sk.typed("U64", 2)}), "not a u32 U64(2)"),
    ("PK406", gguf_model(md={"llama.rope.dimension_count": 8}), "inconsistent last dim size in rope"),
    ("PK408", gguf_model(tensor_types={"blk.0.attn_q.weight": "Q8_1"}), "not supported yet"),
    ("PK409", gguf_model(md={"llama.rope.freq_base": 10000.0}), "transformers uses `rope_theta`=100000"),
    (
        "PK409",
        gguf_model(cfg=sk.config("tf4", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)),
        "no `rope_freqs.weight`",
    ),
    ("PK405", with_target(gguf_model(with_config=False), max_tokens=5000), "you plan 5000 tokens"),
    # weights, per family: each module's own table (portkit.families.<name>.expected_tensors)
    (
        "PK201",
        family_model("qwen2", drop=("model.layers.1.self_attn.k_proj.bias",)),
        "candle 0.11.1's `qwen2` fails at load",
    ),
    ("PK201", family_model("granite", drop=("model.layers.0.mlp.up_proj.weight",)), "`granite` panics at load"),
    (
        "PK201",
        family_model("phi3", drop=("model.norm.weight",)),
        "`phi3` fails at load: the weights have no `model.norm.weight`",
    ),
    (
        "PK202",
        family_model("starcoder2", tie_word_embeddings=False, extra={"lm_head.weight": (256, 64)}),
        "always uses `model.embed_tokens.weight`",
    ),
    (
        "PK202",
        family_model("granite", extra={"model.layers.0.self_attn.q_proj.bias": (64,)}),
        "`granite` never reads 1 tensor",
    ),
    (
        "PK202",
        family_model("stable_lm", extra={"model.layers.0.self_attn.q_layernorm.norms.0.weight": (16,)}),
        "has no such tensor",
    ),
    (
        "PK202",
        family_model(
            "stable_lm", qk_layernorm=True, extra={"model.layers.0.self_attn.k_layernorm.norms.1.weight": (16,)}
        ),
        "transformers reads them (`qk_layernorm` is true)",
    ),
    (
        "PK203",
        family_model("qwen3", extra={"language_model.model.norm.weight": (64,)}),
        "stripping the prefix `language_model.`",
    ),
    (
        "PK204",
        family_model(
            "mistral",
            cfg=family_config("mistral", num_hidden_layers=3),
            tensors=family_tensors(family_config("mistral")),
        ),
        "`mistral` fails at load with `cannot find tensor model.layers.2.",
    ),
    (
        "PK205",
        family_model("mistral", tie_word_embeddings=True, drop=("lm_head.weight",)),
        "`mistral` always reads `lm_head.weight`",
    ),
    (
        "PK205",
        family_model("granite", tie_word_embeddings=True, drop=("lm_head.weight",)),
        "transformers ties it to the embeddings",
    ),
    ("PK205", family_model("stable_lm", drop=("lm_head.weight",)), "`stable_lm` always reads `lm_head.weight`"),
    ("PK205", family_model("qwen3", tie_word_embeddings=False, drop=("lm_head.weight",)), "`qwen3` fails at load"),
    (
        "PK205",
        family_model("qwen2", tie_word_embeddings=True, extra={"lm_head.weight": (256, 64)}),
        "it probes the file, never the flag",
    ),
    (
        "PK205",
        family_model("qwen2", tie_word_embeddings=False, drop=("lm_head.weight",)),
        "silently uses the embeddings",
    ),
    (
        "PK206",
        family_model("phi3", tensors=family_tensors(family_config("phi3", num_key_value_heads=4))),
        "self_attn.qkv_proj.weight` is [192, 64]",
    ),
    (
        "PK206",
        family_model("olmo2", tensors=family_tensors(family_config("olmo2", hidden_size=128))),
        "`olmo2` expects",
    ),
    # gguf, per loader
    (
        "PK401",
        loader_gguf("qwen3", drop_md=("qwen3.rope.freq_base",)),
        "quantized_qwen3 requires `qwen3.rope.freq_base`",
    ),
    ("PK401", loader_gguf("phi3", md={"phi3.block_count": sk.typed("U64", 2)}), "`phi3.block_count` is U64"),
    ("PK407", gguf_model(with_config=False, arch=""), "`general.architecture` is absent"),
    ("PK402", loader_gguf("qwen2", drop_md=("qwen2.rope.freq_base",)), "the GGUF has no `qwen2.rope.freq_base`"),
    (
        "PK409",
        beside_config(loader_gguf("qwen2", md={"qwen2.rope.freq_base": 10000.0}), "qwen2"),
        "`qwen2.rope.freq_base` is 10000; transformers uses `rope_theta`=1000000",
    ),
    (
        "PK409",
        beside_config(loader_gguf("qwen3"), "qwen3", head_dim=32),
        "`qwen3.attention.key_length` is 16; config.json's `head_dim`",
    ),
    (
        "PK409",
        beside_config(
            loader_gguf("gemma3", md={"gemma3.rope.local_freq_base": 10000.0}), "gemma3", num_hidden_layers=2
        ),
        "`gemma3.rope.local_freq_base` is 10000; transformers uses `rope_local_base_freq`=50000",
    ),
    (
        "PK409",
        beside_config(loader_gguf("phi3", md={"phi3.context_length": 64}), "phi3", rms_norm_eps=1e-6),
        "`phi3.context_length` is 64; config.json's `max_position_embeddings` (what transformers uses) is 128",
    ),
    ("PK412", loader_gguf("qwen3", md={"general.dtype": 1}), "`general.dtype` is U32(1)"),
    (
        "PK405",
        with_target(loader_gguf("qwen2"), max_tokens=200),
        "candle 0.11.1's quantized_qwen2 has 128 cos/sin rows (`qwen2.context_length`)",
    ),
    (
        "PK420",
        loader_gguf("phi3", md={"phi3.rope.dimension_count": 32}),
        "is 32 for a 16-wide head (wider than the head)",
    ),
    (
        "PK421",
        with_target(loader_gguf("gemma3"), max_tokens=40),
        "keeps 33 in prefill and every key in decode: they differ from 33 tokens on; you plan 40",
    ),
    (
        "PK416",
        loader_gguf("phi3", md={"phi3.rope.scaling.attn_factor": 1.1832}),
        "`phi3.rope.scaling.attn_factor`=1.1832",
    ),
    (
        "PK418",
        loader_gguf("qwen2", drop=("blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias")),
        "`cannot find tensor info for blk.0.attn_q.bias`",
    ),
    (
        "PK411",
        loader_gguf("gemma3", drop=("blk.1.post_ffw_norm.weight",)),
        "quantized_gemma3 fails at load with `cannot find tensor info for blk.1.post_ffw_norm.weight`",
    ),
    (
        "PK411",
        loader_gguf("qwen3", md={"qwen3.block_count": 3}),
        "`cannot find tensor info for blk.2.attn_norm.weight`",
    ),
    (
        "PK411",
        loader_gguf("phi3", drop=("blk.0.attn_qkv.weight",)),
        "`cannot find tensor info for blk.0.attn_qkv.weight`",
    ),
]

# every family: the rules generalised from llama, triggered with the module named
VARIANTS += [
    ("PK110", family(n, "t5"), f"candle 0.11.1's `{n}` refuses the config: `missing field `{k}``")
    for n, k in T5_MISSING.items()
]
VARIANTS += [
    (
        "PK110",
        family("granite", drop=("hidden_size",)),
        "transformers defaults `hidden_size` to 4096; candle 0.11.1's `granite` refuses the config: `missing field "
        "`hidden_size``",
    ),
    (
        "PK110",
        family("gemma3", "t5"),
        "transformers uses `rope_local_base_freq`=50000 from `rope_parameters.sliding_attention`; candle 0.11.1's "
        "`gemma3` refuses",
    ),
    (
        "PK110",
        family("qwen3_moe", "t5"),
        "transformers uses `num_experts`=4 from the top-level `num_local_experts`; candle 0.11.1's `qwen3_moe` refuses",
    ),
    ("PK110", family("mixtral", "t5"), "missing field `use_flash_attn`"),
    ("PK101", family("granite", "t5"), "candle 0.11.1's `granite` reads no top-level `rope_theta` and uses 10000"),
    (
        "PK101",
        family(
            "gemma3", rope_parameters={"full_attention": {"rope_theta": 1e6}, "sliding_attention": {"rope_theta": 1e4}}
        ),
        "transformers uses `rope_local_base_freq`=10000 from `rope_parameters.sliding_attention`; candle 0.11.1's "
        "`gemma3` reads the top-level `rope_local_base_freq`=50000",
    ),
    (
        "PK102",
        family("gemma3", rope_scaling={"factor": 8.0, "rope_type": "linear"}),
        "`linear` rope scaling from `rope_scaling` (`factor`=8); candle 0.11.1's `gemma3` reads no rope scaling",
    ),
    (
        "PK102",
        family("phi3", rope_scaling={"short_factor": [1.0] * 8, "long_factor": [2.0] * 8, "type": "longrope"}),
        "multiplies the frequencies by the factors",
    ),
    (
        "PK102",
        family("qwen2", rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}),
        "`yarn` rope scaling",
    ),
    (
        "PK102",
        family(
            "phi3",
            "t5",
            rope_parameters={
                "rope_theta": 1e5,
                "rope_type": "longrope",
                "short_factor": [1.0] * 8,
                "long_factor": [2.0] * 8,
                "original_max_position_embeddings": 32,
            },
        ),
        # the save writes the class's top-level `original_max_position_embeddings` (128), which replaces
        # the dict's 32 when transformers loads it (modeling_rope_utils.py:853-858)
        "transformers applies `longrope` rope scaling from `rope_parameters` (`short_factor`=[8 values], "
        "`long_factor`=[8 values], "
        "`original_max_position_embeddings`=128); candle 0.11.1's `phi3` reads no rope scaling",
    ),
    (
        "PK112",
        family("qwen2", "t5"),
        "candle 0.11.1's `qwen2` refuses it at `sliding_window`: `invalid type: null, expected usize`",
    ),
    (
        "PK112",
        family("mixtral"),
        "candle 0.11.1's `mixtral` refuses it at `sliding_window`: `invalid type: null, expected usize`",
    ),
    (
        "PK105",
        family("granite", attention_bias=True),
        "candle 0.11.1's `granite` builds these projections with `linear_no_bias`",
    ),
    ("PK106", family("granite", mlp_bias=True), "candle 0.11.1's `granite` builds the MLP"),
    ("PK107", family("granite", hidden_act="gelu"), "candle 0.11.1's `granite` always applies silu"),
    (
        "PK114",
        model({**TF4, "model_type": "olmo"}, weights=False),
        "candle 0.11.1 has a `olmo` module for `model_type` `olmo`; portkit does not check that module yet",
    ),
    (
        "PK115",
        family("qwen2", sliding_window=4),
        "transformers applies no sliding window; candle 0.11.1's `qwen2` keeps 5 keys on 2 of 2 layers in prefill",
    ),
    (
        "PK115",
        family("gemma2", sliding_window=4),
        "transformers keeps `sliding_window`=4 keys on 1 of 2 layers; candle 0.11.1's `gemma2` keeps 5 keys on 2 of 2 "
        "layers",
    ),
    (
        "PK115",
        family("gemma3"),
        "candle 0.11.1's `gemma3` keeps 33 keys on 5 of 6 layers in prefill and keeps 32 in decode: they differ from "
        "33 tokens on",
    ),
    ("PK115", family("phi3"), "candle 0.11.1's `phi3` applies no window in prefill"),
    # gemma4: the prefill mask keeps W+1 keys on the layers `layer_types` names sliding, the RotatingKvCache W
    (
        "PK115",
        family("gemma4", sliding_window=4),
        "transformers keeps `sliding_window`=4 keys on 2 of 4 layers; candle 0.11.1's `gemma4` keeps 5 keys on 2 of "
        "4 layers in prefill and keeps 4 in decode: they differ from 5 tokens on",
    ),
    (
        "PK115",
        family("gemma4", sliding_window=8, use_bidirectional_attention="all"),
        "keeps 9 keys on 2 of 4 layers in prefill and keeps 5 in decode",
    ),
    (
        "PK115",
        family("qwen3", use_sliding_window=True, sliding_window=64),
        "fails at build with `sliding window is not supported`",
    ),
    (
        "PK115",
        family("qwen3_moe", use_sliding_window=True, sliding_window=64),
        "candle 0.11.1's `qwen3_moe` fails at build",
    ),
    ("PK115", with_target(family("starcoder2"), max_tokens=100), "they differ from 65 tokens on; you plan 100 tokens"),
    ("PK116", family("gemma", drop=("hidden_act",), hidden_activation="gelu"), 'for `hidden_activation`="gelu"'),
    ("PK118", family("gemma3", query_pre_attn_scalar=24), "candle 0.11.1's `gemma3` never reads it"),
    (
        "PK120",
        family("starcoder2", tie_word_embeddings=False),
        "candle 0.11.1's `starcoder2` always uses `embed_tokens`",
    ),
    ("PK120", family("mistral", tie_word_embeddings=True), "candle 0.11.1's `mistral` always loads `lm_head.weight`"),
    ("PK120", family("gemma3", tie_word_embeddings=False), "`gemma3` always uses `embed_tokens`"),
    (
        "PK104",
        family("qwen2", head_dim=32),
        "candle 0.11.1's `qwen2` uses `hidden_size` / `num_attention_heads` = 16, so loading `q_proj` fails",
    ),
    ("PK104", family("phi3", head_dim=32), "so loading `qkv_proj` fails (128 query rows, candle expects 64)"),
    (
        "PK108",
        family("phi3", rope_parameters={"rope_theta": 1e5, "rope_type": "default", "partial_rotary_factor": 0.75}),
        "transformers rotates 12 of 16 head dimensions (`partial_rotary_factor`=0.75 from `rope_parameters`); candle "
        "0.11.1's `phi3` reads no top-level",
    ),
    (
        "PK108",
        family("stable_lm", rope_parameters={"rope_theta": 1e5, "rope_type": "default", "partial_rotary_factor": 0.5}),
        "candle 0.11.1's `stable_lm` reads the top-level `partial_rotary_factor`=0.25 and rotates 4",
    ),
    ("PK301", with_target(CLEAN["qwen2"], dtype="bf16", candle="0.11.0"), "bf16"),
    ("PK306", with_target(CLEAN["gemma3"], max_tokens=200), "candle 0.11.1's `gemma3`'s cos/sin table"),
    (
        "PK308",
        with_target(CLEAN["mixtral"], dtype="f16"),
        "fails at the first forward with `dtype mismatch in mul, lhs: F16, rhs: F32`",
    ),
    (
        "PK308",
        with_target(CLEAN["mixtral"], dtype="bf16", device="cuda"),
        "`dtype mismatch in mul, lhs: BF16, rhs: F32`",
    ),
    ("PK308", with_target(CLEAN["mixtral"], dtype="bf16", device="metal"), "multiplies each expert's bf16 output"),
    (
        "PK321",
        with_target(CLEAN["phi"], dtype="f16"),
        "the first forward fails with `unsupported dtype for rope F16 F32 F32`",
    ),
    ("PK321", with_target(CLEAN["phi"], dtype="bf16", device="metal"), "`dtype mismatch in rope BF16 F32 F32`"),
    (
        "PK317",
        with_target(family("qwen2", max_position_embeddings=32768), dtype="f16"),
        "candle 0.11.1's `qwen2` builds its RoPE table in f16 (qwen2.rs:47-63, :279): positions from 2049 on are "
        "rounded (f16 holds "
        "integers exactly only up to 2048), so over 32768 positions (`max_position_embeddings` 32768) the rotary pair "
        "of inverse frequency 1 turns up to 8 rad off",
    ),
    (
        "PK317",
        with_target(family("gemma", max_position_embeddings=8192), dtype="bf16", device="cuda", max_tokens=1100),
        "positions from 257 on are rounded (bf16 holds integers exactly only up to 256), so over 1100 positions "
        "(`--max-tokens` 1100) the rotary pair of inverse frequency 1 turns up to 4 rad off",
    ),
    (
        "PK317",
        with_target(family("stable_lm", max_position_embeddings=4096), dtype="f16", max_tokens=9000),
        "over 4096 positions (`max_position_embeddings` 4096) the rotary pair of inverse frequency 1 turns up to 1 rad "
        "off",
    ),
    ("PK309", with_target(CLEAN["olmo2"], dtype="f16", turns=2), "`dtype mismatch in cat, lhs: F16, rhs: F32`"),
    (
        "PK309",
        with_target(CLEAN["qwen2"], dtype="bf16", turns=2, device="cuda"),
        "`dtype mismatch in cat, lhs: BF16, rhs: F32`",
    ),
    ("PK310", with_target(CLEAN["gemma3"], turns=2), "a conversation of more than 32 tokens"),
    (
        "PK311",
        with_target(CLEAN["qwen3_moe"], batch=4, dtype="f16", candle="0.11.0"),
        "casts a causal mask of one row shaped for 4 to f16",
    ),
    ("PK311", with_target(CLEAN["qwen3"], batch=2, device="metal", candle="0.11.0"), "fixed in candle 0.11.1"),
    (
        "PK311",
        with_target(CLEAN["qwen3"], batch=2, features=frozenset({"flash-attn"}), candle="0.11.0"),
        "on `cpu` attention reads rows after the first",
    ),
    ("PK313", with_target(loader_gguf("qwen3"), batch=2, device="cuda", candle="0.11.0"), "fixed in candle 0.11.1"),
    # the release decides (portkit.candle_release): the mask from qwen3's first release to 0.11.0, the CPU panic on
    # 0.11.1 too
    ("PK311", with_target(CLEAN["qwen3"], batch=2, device="cuda", candle="0.9.2"), "rows after the first"),
    ("PK313", with_target(loader_gguf("qwen3"), batch=2, candle="0.11.1"), "a panic, not fixed in candle 0.11.1"),
    ("PK114", with_target(CLEAN["qwen3"], candle="0.9.1"), "candle 0.9.1 has no `qwen3` module; it arrived in 0.9.2"),
    ("PK114", with_target(CLEAN["olmo2"], candle="0.9.1"), "candle 0.9.1 has no `olmo2` module; it arrived in 0.9.2"),
    ("PK101", with_target(model(sk.config("tf5")), candle="0.10.0"), "candle 0.10.0 reads no top-level `rope_theta`"),
    (
        "PK316",
        with_target(loader_gguf("gemma3"), batch=2, device="metal"),
        "`Non contiguous rmsnorm is not implemented`",
    ),
]

# Clean variants: (code, builder) that must not trigger `code`.
CLEAN_VARIANTS: list[tuple[str, Builder]] = [
    ("PK109", model(sk.config("tf4", model_type="qwen2", sliding_window=4096, use_sliding_window=False))),
    (
        "PK409",
        gguf_model(
            cfg=sk.config("tf4", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING), rope_freqs_values=_llama3_factors()
        ),
    ),
    ("PK402", gguf_model(cfg=sk.config("tf4", rope_theta=10000.0), drop_md=("llama.rope.freq_base",))),
    ("PK410", qk_pair(permuted=True)),
    # a checkpoint each family's candle module loads as is: no weights finding at all
    *[
        (code, family_model(fam))
        for fam in (
            "mistral",
            "qwen2",
            "qwen3",
            "qwen3_moe",
            "gemma",
            "gemma2",
            "gemma3",
            "phi3",
            "olmo2",
            "granite",
            "starcoder2",
            "stable_lm",
            "mixtral",
        )
        for code in ("PK201", "PK202", "PK203", "PK204", "PK205", "PK206")
    ],
    (
        "PK205",
        family_model("qwen2", tie_word_embeddings=True, drop=("lm_head.weight",)),
    ),  # tied, no lm_head: candle probes and ties too
    ("PK205", family_model("qwen2", tie_word_embeddings=False, extra={"lm_head.weight": (256, 64)})),
    ("PK201", family_model("gemma")),  # no lm_head.weight: gemma never asks for one
    ("PK401", loader_gguf("qwen2")),
    ("PK401", loader_gguf("gemma3")),
    ("PK401", loader_gguf("phi3")),
    ("PK402", loader_gguf("qwen3", drop_md=("qwen3.rope.freq_base",))),  # quantized_qwen3 requires it: PK401's
    ("PK407", loader_gguf("gemma3")),
    ("PK411", mixtral_gguf(merged=True)),  # PK419 says it
    ("PK414", loader_gguf("gemma3", md={"gemma3.rope.freq_base_swa": 50000.0, "gemma3.rope.local_freq_base": 50000.0})),
    ("PK416", loader_gguf("phi3", md={"phi3.rope.scaling.attn_factor": 1.0})),
    ("PK417", loader_gguf("qwen2", drop=("output.weight",))),  # qwen2 falls back to token_embd
    ("PK411", loader_gguf("qwen2", drop=("output.weight",))),
    ("PK411", loader_gguf("qwen2", drop=("blk.0.attn_q.bias",))),  # PK418's
    ("PK411", loader_gguf("phi3", drop=("output.weight",))),  # PK417's
    ("PK411", loader_gguf("qwen3")),
    ("PK411", loader_gguf("gemma3")),
    ("PK411", loader_gguf("phi3")),
    ("PK418", loader_gguf("qwen3")),
    ("PK405", with_target(loader_gguf("phi3"), max_tokens=128)),
    (
        "PK405",
        loader_gguf("qwen3", md={"qwen3.context_length": 1_000_000}),
    ),  # its own table: no mismatch without a plan
    ("PK409", beside_config(loader_gguf("qwen2"), "qwen2")),
    ("PK409", beside_config(loader_gguf("qwen3"), "qwen3")),
    ("PK409", beside_config(loader_gguf("gemma3"), "gemma3", num_hidden_layers=2)),
    (
        "PK409",
        beside_config(loader_gguf("phi3", md={"phi3.rope.freq_base": 1.0}), "phi3", rms_norm_eps=1e-6),
    ),  # phi3's base is PK415's
    (
        "PK409",
        beside_config(loader_gguf("qwen2", md={"qwen2.rope.freq_base": 10000.0}), "qwen3"),
    ),  # another family's config: not compared
]
# every family's legacy config is clean for the generalised rules
CLEAN_VARIANTS += [
    (code, CLEAN[n]) for n in OTHER_FAMILIES for code in ("PK101", "PK102", "PK104", "PK110", "PK112", "PK116", "PK120")
]
CLEAN_VARIANTS += [
    ("PK115", family("qwen2")),  # sliding_window = max_position_embeddings: candle's window is never reached
    ("PK115", family("gemma4", sliding_window=128)),  # the same in gemma4: never reached
    ("PK115", CLEAN["mixtral"]),
    ("PK115", family("mistral", sliding_window=None)),
    ("PK116", family("gemma", hidden_act="gelu_pytorch_tanh")),
    ("PK117", family("gemma", drop=("hidden_act",), hidden_activation="gelu_pytorch_tanh")),
    ("PK118", family("gemma3", query_pre_attn_scalar=16)),
    ("PK119", family("granite", attention_multiplier=0.25)),  # 1/sqrt(head_dim 16): candle's own scale
    ("PK120", family("granite", tie_word_embeddings=False)),
    ("PK120", family("gemma", tie_word_embeddings=True)),
    ("PK105", family("granite", attention_bias=False)),
    ("PK104", family("qwen2", head_dim=16)),  # hidden/heads: the same head either way
    (
        "PK108",
        family("phi3", partial_rotary_factor=0.75, rope_parameters={"rope_theta": 1e5, "partial_rotary_factor": 0.75}),
    ),
    ("PK108", CLEAN["stable_lm"]),
    ("PK104", family("mistral", head_dim=32)),  # candle's mistral reads `head_dim`
    ("PK306", with_target(CLEAN["gemma3"], max_tokens=128)),
    ("PK307", family("gemma2")),  # no flash attention: candle caps on its plain path
    ("PK308", with_target(CLEAN["mixtral"], dtype="bf16")),  # bf16 on the CPU: PK301's matmul error comes first
    (
        "PK317",
        with_target(family("qwen3", max_position_embeddings=32768), dtype="f16"),
    ),  # qwen3.rs builds its table in F32
    ("PK317", with_target(family("llama", max_position_embeddings=32768), dtype="bf16", device="cuda")),  # llama.rs too
    (
        "PK317",
        with_target(family("qwen2", max_position_embeddings=32768), dtype="bf16"),
    ),  # bf16 on the CPU: PK301 first
    ("PK317", family("qwen2", max_position_embeddings=32768)),  # f32: the table holds every position
    (
        "PK317",
        with_target(family("qwen2", max_position_embeddings=2049), dtype="f16"),
    ),  # the last position, 2048, is exact
    ("PK308", with_target(CLEAN["qwen3_moe"], dtype="f16")),  # qwen3_moe casts its routing weights
    ("PK308", with_target(CLEAN["mistral"], dtype="f16", device="cuda")),
    ("PK321", with_target(CLEAN["phi"], dtype="bf16")),  # bf16 on the CPU: PK301's matmul error comes first
    ("PK321", with_target(CLEAN["phi3"], dtype="f16")),  # phi3 builds its table in the model dtype (PK317)
    ("PK121", family("gemma3", num_hidden_layers=5)),  # five sliding layers, no full-attention one
    ("PK305", with_target(CLEAN["qwen2"], use_flash_attn=True, device="cuda")),  # qwen2 takes no use_flash_attn
    ("PK309", with_target(CLEAN["qwen2"], dtype="bf16", turns=2)),  # bf16 on the CPU: PK301's matmul error comes first
    ("PK309", with_target(CLEAN["mistral"], dtype="f16", turns=2)),  # mistral makes the prefix f32
    ("PK309", with_target(CLEAN["qwen2"], dtype="f16")),  # one turn: no multi-token forward at an offset
    ("PK310", with_target(CLEAN["gemma2"], turns=2, max_tokens=200)),  # gemma2 keeps every key
    ("PK311", with_target(CLEAN["qwen3_moe"], batch=2)),  # f32 on the CPU: built, never read
    ("PK311", with_target(CLEAN["qwen3"], batch=2, device="cuda", candle="0.11.1")),  # fixed: candle#3586, #3879
    ("PK311", with_target(CLEAN["qwen3_moe"], batch=4, dtype="f16", candle="0.11.1")),
    ("PK313", with_target(loader_gguf("qwen3"), batch=2, device="cuda", candle="0.11.1")),
    ("PK114", with_target(CLEAN["qwen3"], candle="0.9.2")),  # the release that added it
    ("PK114", with_target(CLEAN["qwen2"], candle="0.9.1")),
    ("PK311", with_target(CLEAN["qwen3"], batch=2, dtype="f16")),  # the CPU builds no mask for qwen3
    (
        "PK311",
        with_target(CLEAN["qwen3"], batch=2, device="cuda", features=frozenset({"cuda", "flash-attn"})),
    ),  # flash attention masks itself
    ("PK311", with_target(CLEAN["qwen2"], batch=2, device="cuda")),  # qwen2 expands a one-row mask
    ("PK312", with_target(CLEAN["qwen3"], batch=2)),  # qwen3 has no padding-mask forward
    ("PK313", with_target(loader_gguf("qwen2"), batch=2)),
    ("PK314", with_target(loader_gguf("qwen2"), turns=2)),
    ("PK315", with_target(loader_gguf("qwen3"), turns=2)),
    ("PK316", with_target(loader_gguf("qwen3"), batch=2, device="cuda")),
]

# PK5xx: tokenizer directories (tests/unit/tokenizer_cases.py)
from tests.unit.tokenizer_cases import TOKENIZER_CASES, TOKENIZER_CLEAN_VARIANTS, TOKENIZER_VARIANTS  # noqa: E402

CASES.update(TOKENIZER_CASES)
VARIANTS += TOKENIZER_VARIANTS
CLEAN_VARIANTS += TOKENIZER_CLEAN_VARIANTS

# PK6xx: sentence-transformers pipelines (fixtures/sentence_pipelines.py)
from fixtures.sentence_pipelines import PIPELINE_CASES  # noqa: E402
from fixtures.sentence_pipelines import _case as pipeline_case  # noqa: E402

CASES.update(PIPELINE_CASES)
# candle-nn 0.11.0 asks for `weight`/`bias` only (layer_norm.rs): an older BERT's `gamma`/`beta` fail there
CASES["PK623"] = (with_target(PIPELINE_CASES["PK623"][0], candle="0.11.0"), PIPELINE_CASES["PK623"][1])
# bert.rs's mask in f16 is NaN; at f32 (the default target) it is not
CASES["PK618"] = (with_target(PIPELINE_CASES["PK611"][0], dtype="f16"), PIPELINE_CASES["PK611"][0])
# candle-nn 0.11.1 reads `gamma`/`beta` where `weight`/`bias` are absent: the same checkpoint loads there
CLEAN_VARIANTS.append(("PK623", PIPELINE_CASES["PK623"][0]))
VARIANTS.append(
    (
        "PK623",
        with_target(PIPELINE_CASES["PK623"][0], candle="0.9.1"),
        "the load fails on `embeddings.LayerNorm.weight`",
    )
)
# phi3.rs 0.9.1:41 reads `rope_scaling` as a string: Phi-3.5's LongRoPE object is refused there; 0.9.2 reads RopeScaling
_PHI35_LONGROPE = family("phi3", rope_scaling={"type": "longrope", "short_factor": [1.0] * 8, "long_factor": [1.5] * 8})
VARIANTS.append(
    (
        "PK112",
        with_target(_PHI35_LONGROPE, candle="0.9.1"),
        "refuses it at `rope_scaling`: `invalid type: map, expected a string`",
    )
)
CLEAN_VARIANTS.append(("PK112", with_target(_PHI35_LONGROPE, candle="0.9.2")))
# a LayerNorm saved under both names: candle reads `weight`, nothing fails
CLEAN_VARIANTS.append(
    (
        "PK623",
        pipeline_case(
            tensors={
                "embeddings.LayerNorm.weight": [32],
                "embeddings.LayerNorm.bias": [32],
                "embeddings.LayerNorm.gamma": [32],
                "embeddings.LayerNorm.beta": [32],
            }
        ),
    )
)
# a message names the release the user runs, not the one its fact was first read in
VARIANTS.append(("PK301", with_target(CASES["PK301"][0], candle="0.10.0"), "candle 0.10.0 fails at the first forward"))
# candle-core 0.11.1 widens a BF16 matmul on the CPU to f32 (cpu_backend/mod.rs:3062-3071)
CLEAN_VARIANTS.append(("PK301", with_target(CASES["PK301"][0], candle="0.11.1")))
# candle 0.9.1 has no quantized_qwen3 (it arrived in 0.9.2): a qwen3 GGUF goes to quantized_llama there
VARIANTS.append(
    (
        "PK407",
        with_target(loader_gguf("qwen3"), candle="0.9.1"),
        "candle 0.9.1 has no GGUF loader for it (`quantized_qwen3` arrived in 0.9.2)",
    )
)
CLEAN_VARIANTS.append(("PK407", with_target(loader_gguf("qwen3"), candle="0.9.2")))
# quantized_qwen3's own facts do not apply where candle has no quantized_qwen3
CLEAN_VARIANTS.append(("PK412", with_target(loader_gguf("qwen3"), candle="0.9.1")))
# candle has a loader portkit does not check yet for these architectures (and only from the release that added it)
VARIANTS.append(
    (
        "PK407",
        gguf_model(arch="lfm2", with_config=False),
        "candle 0.11.1 reads it with `quantized_lfm2`, a loader portkit does not check yet",
    )
)
# quantized_glm4 and quantized_smollm3 arrived in 0.9.2: on 0.9.1 their files go to quantized_llama
VARIANTS.append(
    (
        "PK407",
        with_target(loader_gguf("glm4"), candle="0.9.1"),
        "(`quantized_glm4` arrived in 0.9.2)",
    )
)
VARIANTS.append(
    (
        "PK407",
        with_target(loader_gguf("smollm3"), candle="0.9.1"),
        "(`quantized_smollm3` arrived in 0.9.2)",
    )
)
CLEAN_VARIANTS.append(("PK407", loader_gguf("smollm3")))
# a GGUF's first missing tensor through quantized_smollm3's VarBuilder: named without its block
VARIANTS.append(("PK411", loader_gguf("smollm3", drop=("blk.1.ffn_up.weight",)), "`cannot find tensor ffn_up.weight`"))
# 3 heads of 128: one chunk from each half, 256 of 384 rows kept: the first forward fails in the reshape
VARIANTS.append(
    (
        "PK426",
        loader_gguf(
            "smollm3",
            md={"smollm3.attention.head_count": 3},
            extra={f"blk.{i}.attn_{x}.weight": ("F32", (64, 384)) for i in range(2) for x in "qkv"},
        ),
        "keeps 256 of `attn_q`'s rows",
    )
)
# 64-wide heads: every chunk spans two heads, silently
VARIANTS.append(
    (
        "PK426",
        loader_gguf(
            "smollm3",
            md={
                "smollm3.rope.dimension_count": 64,
                "smollm3.attention.head_count": 4,
                "smollm3.attention.head_count_kv": 4,
            },
        ),
        "which straddle this model's heads",
    )
)
VARIANTS.append(
    (
        "PK401",
        loader_gguf("smollm3", drop_md=("smollm3.vocab_size",)),
        "`Missing or invalid metadata key: smollm3.vocab_size`",
    )
)
VARIANTS.append(
    (
        "PK407",
        with_target(gguf_model(arch="lfm2", with_config=False), candle="0.9.1"),
        "(`quantized_lfm2` arrived in 0.9.2)",
    )
)
# quantized_qwen3_moe's fused MoE kernel is CUDA-only (candle-nn moe.rs:339-352): an error on the CPU, not on CUDA
VARIANTS.append(
    (
        "PK407",
        gguf_model(arch="qwen3moe", with_config=False),
        "on cpu its first forward fails (`moe_gemm_gguf is only implemented for the cuda backend`",
    )
)

# quantized_qwen3's two CPU caches arrived in 0.11.0: a later turn is computed on one ConcatKvCache before
CLEAN_VARIANTS.append(("PK314", with_target(CASES["PK314"][0], candle="0.10.2")))
# candle-core 0.9.1 cannot read a BF16 GGUF tensor's header (type 30 arrived in 0.9.2)
VARIANTS.append(
    (
        "PK408",
        with_target(gguf_model(tensor_types={"blk.0.attn_q.weight": "BF16"}), candle="0.9.1"),
        "unknown dtype for tensor 30",
    )
)
CLEAN_VARIANTS.append(("PK408", with_target(gguf_model(tensor_types={"blk.0.attn_q.weight": "BF16"}), candle="0.9.2")))
# an embedding-gemma-style GGUF whose keys are under `gemma2.`: quantized_gemma3 finds them from 0.9.2
# (it probes gemma3, gemma2, gemma, gemma-embedding); 0.9.1 asks for `gemma3.attention.head_count` and fails
_GEMMA3_KEYS = {
    "block_count": 2,
    "embedding_length": 64,
    "attention.head_count": 4,
    "attention.head_count_kv": 2,
    "attention.layer_norm_rms_epsilon": 1e-6,
    **_LOADER_META["gemma3"],
}
_GEMMA2_PREFIXED = loader_gguf(
    "gemma3",
    md={f"gemma2.{k}": v for k, v in _GEMMA3_KEYS.items()},
    drop_md=tuple(f"gemma3.{k}" for k in _GEMMA3_KEYS),
)
VARIANTS.append(("PK401", with_target(_GEMMA2_PREFIXED, candle="0.9.1"), "gemma3.attention.head_count"))
CLEAN_VARIANTS.append(("PK401", with_target(_GEMMA2_PREFIXED, candle="0.9.2")))
# quantized_llama's NEOX list arrived in 0.11.0 (candle#3411): up to 0.10.2 a qwen2-architecture GGUF read by it is
# paired interleaved, as everything is; from 0.11.0 it is paired NEOX
VARIANTS.append(("PK403", with_target(gguf_model(arch="qwen2moe"), candle="0.10.2"), "its NEOX list arrived in 0.11.0"))
CLEAN_VARIANTS.append(("PK403", gguf_model(arch="qwen2moe")))
# a square mask for a later turn up to 0.10.1 (candle#3437): llama.rs, granite.rs and three GGUF loaders
CASES["PK318"] = (
    with_target(CLEAN["llama"], turns=2, candle="0.10.1"),
    with_target(CLEAN["llama"], turns=2, candle="0.10.2"),
)
VARIANTS.append(("PK318", with_target(CLEAN["granite"], turns=2, candle="0.9.1"), "fails with `cannot broadcast`"))
CLEAN_VARIANTS.append(("PK318", with_target(CLEAN["llama"], turns=2, candle="0.10.1", use_flash_attn=True)))
CLEAN_VARIANTS.append(("PK318", with_target(CLEAN["qwen2"], turns=2, candle="0.10.1")))
CASES["PK319"] = (with_target(gguf_model(), turns=2, candle="0.9.2"), with_target(gguf_model(), turns=2))
# SmolLM3's NoPE layers: transformers' default interval (4) where config.json names neither key
CASES["PK124"] = (
    family("smollm3", num_hidden_layers=4, drop=("no_rope_layers", "no_rope_layer_interval")),
    family("smollm3", num_hidden_layers=4, no_rope_layers=[1, 1, 1, 0], drop=("no_rope_layer_interval",)),
)
VARIANTS.append(
    (
        "PK124",
        family("smollm3", num_hidden_layers=8, drop=("no_rope_layers", "no_rope_layer_interval")),
        "transformers leaves layers 3, 7 without RoPE (`no_rope_layers` from `no_rope_layer_interval`)",
    )
)
CLEAN_VARIANTS.append(("PK124", CLEAN["smollm3"]))
# smollm3's undersized batch mask is read on every device: on the CPU it panics (PK311 holds until 0.11.1)
VARIANTS.append(
    (
        "PK311",
        with_target(CLEAN["smollm3"], batch=2, candle="0.11.0"),
        "on the CPU attention reads past its buffer and panics",
    )
)
CLEAN_VARIANTS.append(("PK311", with_target(CLEAN["smollm3"], batch=2, candle="0.11.1")))
# the interval alone: candle reads it as transformers computes the list from it
CLEAN_VARIANTS.append(
    ("PK124", family("smollm3", num_hidden_layers=4, no_rope_layer_interval=2, drop=("no_rope_layers",)))
)
# phi.rs's square mask for a later turn: never fixed, every release
CASES["PK320"] = (with_target(CLEAN["phi"], turns=2), CLEAN["phi"])
# phi.rs's F32 rotary table, never cast: every release
CASES["PK321"] = (with_target(CLEAN["phi"], dtype="f16"), CLEAN["phi"])
VARIANTS.append(
    ("PK320", with_target(CLEAN["phi"], turns=2, candle="0.9.1"), "fails with `shape mismatch in where_cond`")
)
VARIANTS.append(("PK320", with_target(CLEAN["phi"], turns=2, candle="0.11.1"), "candle 0.11.1's `phi`"))
CLEAN_VARIANTS.append(("PK320", with_target(CLEAN["llama"], turns=2)))
VARIANTS.append(
    ("PK319", with_target(loader_gguf("qwen2"), turns=2, candle="0.10.0"), "quantized_qwen2 builds the causal mask")
)
CLEAN_VARIANTS.append(("PK319", with_target(loader_gguf("gemma3"), turns=2, candle="0.10.0")))
VARIANTS.append(
    ("PK319", with_target(loader_gguf("phi2"), turns=2, candle="0.10.1"), "quantized_phi builds the causal mask")
)
# quantized_glm4 and quantized_smollm3 fail a batch on every release that has them, each release its own way
# PK405 for the three: quantized_phi's table is a fixed 4096 rows, glm4's `context_length`, smollm3's
# `context_length` or 4096 without it
VARIANTS.append(
    ("PK405", with_target(loader_gguf("phi2"), max_tokens=5000), "4096 cos/sin rows (its fixed MAX_SEQ_LEN)")
)
CLEAN_VARIANTS.append(("PK405", with_target(loader_gguf("phi2"), max_tokens=4096)))
VARIANTS.append(("PK405", with_target(loader_gguf("glm4"), max_tokens=200), "128 cos/sin rows (`glm4.context_length`)"))
VARIANTS.append(
    (
        "PK405",
        with_target(loader_gguf("smollm3", drop_md=("smollm3.context_length",)), max_tokens=5000),
        "4096 cos/sin rows (its MAX_SEQ_LEN, with no `smollm3.context_length`)",
    )
)
CLEAN_VARIANTS.append(
    ("PK405", with_target(loader_gguf("smollm3", drop_md=("smollm3.context_length",)), max_tokens=4096))
)
CASES["PK323"] = (with_target(loader_gguf("glm4"), batch=2), with_target(loader_gguf("glm4"), batch=1))
VARIANTS.append(("PK323", with_target(loader_gguf("glm4"), batch=2, candle="0.11.0"), "Shape mismatch, got buffer"))
CASES["PK324"] = (with_target(loader_gguf("smollm3"), batch=2), with_target(loader_gguf("smollm3"), batch=1))
VARIANTS.append(("PK324", with_target(loader_gguf("smollm3"), batch=2, candle="0.10.2"), "Shape mismatch, got buffer"))
CLEAN_VARIANTS.append(("PK324", with_target(loader_gguf("smollm3"), batch=2, device="cuda")))
CLEAN_VARIANTS.append(("PK319", with_target(loader_gguf("phi2"), turns=2, candle="0.10.2")))
# nomic_bert.rs arrived in candle 0.10.0: on 0.9.2 a nomic_bert checkpoint has no module, and its PK6xx facts say
# nothing
VARIANTS.append(
    (
        "PK114",
        with_target(PIPELINE_CASES["PK613"][0], candle="0.9.2"),
        "candle 0.9.2 has no `nomic_bert` module; it arrived in 0.10.0",
    )
)
CLEAN_VARIANTS.append(("PK613", with_target(PIPELINE_CASES["PK613"][0], candle="0.9.2")))
# glm4_new (GLM-4-0414): the keys transformers' Glm4Config defaults and candle's Config reads otherwise
CASES["PK125"] = (family("glm4_new", drop=("attention_bias",)), CLEAN["glm4_new"])
CLEAN_VARIANTS.append(("PK125", family("glm4_new", attention_bias=False)))  # written: both read it
VARIANTS.append(
    (
        "PK104",
        family("glm4_new", drop=("head_dim",), hidden_size=64),
        "transformers uses `head_dim`=128 (its default: config.json has none); candle 0.11.1's `glm4_new` uses "
        "`hidden_size` / `num_attention_heads` = 16",
    )
)
CLEAN_VARIANTS.append(("PK104", family("glm4_new", head_dim=32)))  # written: candle reads it too
CLEAN_VARIANTS.append(("PK104", family("glm4_new", drop=("head_dim",), hidden_size=512)))  # 512 / 4 = 128
VARIANTS.append(
    (
        "PK108",
        family("glm4_new", drop=("partial_rotary_factor",)),
        "transformers rotates 8 of 16 head dimensions (`partial_rotary_factor`=0.5 by default); candle 0.11.1's "
        "`glm4_new` reads no top-level `partial_rotary_factor` and rotates all 16",
    )
)
# a transformers-5 save: the factor only in rope_parameters, behind PK110's refusal of the missing rope_theta
VARIANTS.append(("PK108", family("glm4_new", layout="t5"), "(`partial_rotary_factor`=0.5 from `rope_parameters`)"))
CLEAN_VARIANTS.append(("PK108", family("glm4_new", partial_rotary_factor=1.0, drop=())))
# glm4_new.rs's rotary embedding keeps row 0: every release; before 0.11.1 the undersized mask comes first
CASES["PK322"] = (
    with_target(CLEAN["glm4_new"], batch=2, candle="0.11.1"),
    with_target(CLEAN["glm4_new"], candle="0.11.1"),
)
VARIANTS.append(
    (
        "PK322",
        with_target(CLEAN["glm4_new"], batch=2, device="cuda", candle="0.11.0"),
        "so every row after the first attends with them",
    )
)
VARIANTS.append(
    ("PK322", with_target(CLEAN["glm4_new"], batch=2, candle="0.9.2", device="metal"), "candle 0.9.2's `glm4_new`")
)
CLEAN_VARIANTS.append(("PK322", with_target(CLEAN["glm4_new"], batch=2, candle="0.11.0")))  # before 0.11.1: PK311 first
VARIANTS.append(
    (
        "PK311",
        with_target(CLEAN["glm4_new"], batch=2, candle="0.11.0"),
        "on the CPU attention reads past its buffer and panics",
    )
)
CLEAN_VARIANTS.append(("PK322", with_target(CLEAN["qwen3"], batch=2, candle="0.11.1")))
# qwen3 and qwen3_moe before 0.11.0: no CPU flash-attention path, so the undersized mask is read on the CPU too
VARIANTS.append(
    (
        "PK311",
        with_target(CLEAN["qwen3"], batch=2, candle="0.10.2"),
        "candle 0.10.2's `qwen3`'s causal mask holds one row shaped for 2 (qwen3.rs 0.10.2:317-352), and on the CPU "
        "attention reads past its buffer and panics",
    )
)
VARIANTS.append(("PK311", with_target(CLEAN["qwen3_moe"], batch=2, candle="0.9.2"), "on the CPU attention reads past"))
# gemma4 (Gemma 4's text decoder): what every checkpoint computes otherwise, and the features candle lacks
_G4_ROPE = {
    "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 100000.0, "rope_type": "proportional"},
    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
}
# every gemma4 config candle reads; gemma3's (Gemma 1-3 store the gain minus one) is the clean twin
CASES["PK126"] = (CLEAN["gemma4"], CLEAN["gemma3"])
CLEAN_VARIANTS.append(("PK126", family("gemma4", drop=("layer_types",))))  # refused by serde: nothing runs
VARIANTS.append(("PK126", family("gemma4", "t5"), "multiplies by (weight + 1) and scales by 1/sqrt(head_dim)"))
CASES["PK127"] = (family("gemma4", "t5"), CLEAN["gemma4"])
VARIANTS.append(
    (
        "PK127",
        family("gemma4", "t5"),
        "with 32-wide heads from `per_layer_config`; candle 0.11.1's `gemma4` reads no `global_head_dim` and uses 512, "
        "so loading `model.layers.1.self_attn.q_proj` fails",
    )
)
VARIANTS.append(
    (
        "PK127",
        family(
            "gemma4",
            attention_k_eq_v=True,
            per_layer_config={
                "1": {"head_dim": 32, "num_key_value_heads": 1},
                "3": {"head_dim": 32, "num_key_value_heads": 1},
            },
        ),
        "reads no `num_global_key_value_heads` and uses 2, so loading `model.layers.1.self_attn.k_proj` fails",
    )
)
CLEAN_VARIANTS.append(("PK127", family("gemma4", "t5", global_head_dim=32)))  # written: candle reads it
# 512-wide full layers: candle's default is right without the key
CLEAN_VARIANTS.append(
    ("PK127", family("gemma4", "t5", per_layer_config={"1": {"head_dim": 512}, "3": {"head_dim": 512}}))
)
CASES["PK128"] = (family("gemma4", hidden_size_per_layer_input=16), CLEAN["gemma4"])
VARIANTS.append(
    (
        "PK128",
        family("gemma4", drop=("hidden_size_per_layer_input",)),
        "(`hidden_size_per_layer_input`=256 (its default: config.json has none))",
    )
)
CASES["PK129"] = (family("gemma4", num_kv_shared_layers=2), CLEAN["gemma4"])
VARIANTS.append(
    ("PK129", family("gemma4", num_kv_shared_layers=2), "fails on `model.layers.2.self_attn.k_proj.weight`")
)
VARIANTS.append(("PK129", family("gemma4", attention_k_eq_v=True), "fails on `model.layers.1.self_attn.v_proj.weight`"))
CLEAN_VARIANTS.append(("PK129", family("gemma4", num_kv_shared_layers=0, attention_k_eq_v=False)))
CASES["PK130"] = (
    family("gemma4", enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=32),
    CLEAN["gemma4"],
)
CLEAN_VARIANTS.append(("PK130", family("gemma4", enable_moe_block=False, num_experts=4)))
# PK122 on gemma4: "all" attends both ways (its save writes `is_causal: false` too); "vision" only among image tokens
VARIANTS.append(
    (
        "PK122",
        family("gemma4", use_bidirectional_attention="all", is_causal=False),
        'use_bidirectional_attention`="all"',
    )
)
CLEAN_VARIANTS.append(("PK122", family("gemma4", use_bidirectional_attention="vision")))
# the full layers' rope base: transformers reads rope_parameters.full_attention, candle the top-level key
VARIANTS.append(
    (
        "PK101",
        family("gemma4", rope_parameters=_G4_ROPE),
        "transformers uses `rope_theta`=100000 from `rope_parameters.full_attention`; candle 0.11.1's `gemma4` reads "
        "no top-level `rope_theta` and uses 1000000",
    )
)
VARIANTS.append(("PK101", family("gemma4", rope_theta=10000.0), "reads the top-level `rope_theta`=10000"))
CLEAN_VARIANTS.append(("PK101", family("gemma4", rope_parameters=_G4_ROPE, rope_theta=100000.0)))  # fix's edit
# candle's full layers always rotate proportionally; a sliding layer's scaling it never computes
CLEAN_VARIANTS.append(("PK102", CLEAN["gemma4"]))
VARIANTS.append(
    (
        "PK102",
        family(
            "gemma4",
            rope_parameters={
                **_G4_ROPE,
                "sliding_attention": {"rope_theta": 10000.0, "rope_type": "linear", "factor": 2.0},
            },
        ),
        "transformers applies `linear` rope scaling to its sliding-attention layers",
    )
)
# phi's qk_layernorm: a head_dim LayerNorm over all heads at once fails at the first forward (every release)
CASES["PK131"] = (family("phi", qk_layernorm=True), family("phi"))
VARIANTS.append(("PK131", family("phi", qk_layernorm=True), "applies the 16-wide LayerNorm to all 64 features at once"))
VARIANTS.append(("PK131", with_target(family("phi", qk_layernorm=True), candle="0.9.1"), "candle 0.9.1's `phi`"))
# one head: the LayerNorm over every feature is the one over the head
CLEAN_VARIANTS.append(("PK131", family("phi", qk_layernorm=True, num_attention_heads=1, num_key_value_heads=1)))
