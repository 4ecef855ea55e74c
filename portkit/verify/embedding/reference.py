"""sentence-transformers' side: the published pipeline as its users run it (`SentenceTransformer`,
local files only, no remote code, eager attention, cpu), in f32 (the reference) and in f64 (the
truth the tolerances are measured against: `portkit.verify.judge.floor`).

The texts are tokenized once, by sentence-transformers' own `preprocess` (transformers' tokenizer,
truncated to the pipeline's `max_seq_length`); candle runs on the same ids, so a difference below
is the model's or the pooling's, never the tokenizer's (the tokens section compares those).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from portkit.verify.cachefiles import package_version
from portkit.verify.errors import BadInput


@dataclass(frozen=True)
class Step:
    """One module after the encoder, as a candle program must apply it."""

    kind: str  # "pool", "dense", "normalize"
    mode: str | None = None  # pool: sentence-transformers' pooling mode
    include_prompt: bool = True  # pool: whether the prompt's tokens are pooled
    weight: np.ndarray | None = None  # dense
    bias: np.ndarray | None = None  # dense
    activation: str = "torch.nn.modules.linear.Identity"  # dense

    def describe(self) -> str:
        if self.kind == "pool":
            return f"Pooling({self.mode}{'' if self.include_prompt else ', without the prompt'})"
        if self.kind == "dense":
            assert self.weight is not None
            return f"Dense({self.weight.shape[1]}->{self.weight.shape[0]}, {self.activation.rsplit('.', 1)[-1]})"
        return "Normalize"


@dataclass(frozen=True)
class Encoded:
    """One forward's inputs: [rows, seq] int arrays, transformers' conventions (mask 1 = a token)."""

    ids: np.ndarray
    type_ids: np.ndarray | None
    mask: np.ndarray
    prompt_length: int = 0


@dataclass(frozen=True)
class Side:
    """One side's outputs of one forward: the sentence embeddings [rows, dim], the encoder's output
    (`token_embeddings`, [rows, seq, hidden]) and, where recorded, the hidden states after the
    embeddings and after each layer [n_layers + 1, rows, seq, hidden] (transformers'
    `output_hidden_states`; a module with a final norm applies it after the last of these)."""

    embeddings: np.ndarray
    last: np.ndarray
    hidden: np.ndarray | None
    sublayers: dict[str, np.ndarray] = field(default_factory=dict)  # "layers.N.<name>": [rows, seq, hidden]


@dataclass
class EmbeddingReference:
    model_type: str
    architecture: str
    steps: tuple[Step, ...]
    max_seq_length: int | None
    prompt: str  # the default prompt prepended to every text ("" when none)
    texts: tuple[str, ...]
    single: list[Encoded]
    batch: Encoded
    reference: list[Side]  # f32, per text
    truth: list[Side]  # f64, per text
    batch_reference: Side | None = None
    batch_truth: Side | None = None
    versions: dict[str, str] = field(default_factory=dict)

    def pipeline(self) -> str:
        return " -> ".join(
            [
                f"Transformer({self.architecture}, max_seq_length {self.max_seq_length})",
                *(s.describe() for s in self.steps),
            ]
        )


def _steps(st: Any) -> tuple[Step, ...]:
    """The modules after the first (the Transformer), by their class names: Pooling, Dense, Normalize."""
    out = []
    for m in list(st)[1:]:
        kind = type(m).__name__
        if kind == "Pooling":
            mode = m.pooling_mode if isinstance(m.pooling_mode, str) else "+".join(m.pooling_mode)
            out.append(Step("pool", mode=mode, include_prompt=bool(getattr(m, "include_prompt", True))))
        elif kind == "Dense":
            lin = m.linear
            act = type(m.activation_function).__module__ + "." + type(m.activation_function).__name__
            bias = lin.bias.detach().double().numpy() if lin.bias is not None else None
            out.append(Step("dense", weight=lin.weight.detach().double().numpy(), bias=bias, activation=act))
        elif kind == "Normalize":
            out.append(Step("normalize"))
        else:
            raise BadInput(
                f"the sentence-transformers pipeline has a {kind} module, which portkit verify does not reproduce on "
                "candle's side"
            )
    return tuple(out)


def _encode(st: Any, texts: list[str], prompt_length: int) -> tuple[dict[str, Any], Encoded]:
    features = st.preprocess(texts)
    tensors = {k: v for k, v in features.items() if k in ("input_ids", "token_type_ids", "attention_mask")}
    tt = tensors.get("token_type_ids")
    enc = Encoded(
        ids=tensors["input_ids"].numpy().astype(np.int64),
        type_ids=tt.numpy().astype(np.int64) if tt is not None else None,
        mask=tensors["attention_mask"].numpy().astype(np.int64),
        prompt_length=prompt_length,
    )
    if prompt_length:
        features["prompt_length"] = prompt_length
    return features, enc


def _side(st: Any, features: dict[str, Any], dtype: Any, sublayers: tuple[tuple[str, str], ...] = ()) -> Side:
    """One forward; `sublayers` (`portkit.encoders.SUBLAYERS`): the modules whose outputs a forward
    hook keeps, as candle's capture copy names them."""
    import torch

    model = st[0].auto_model
    modules = dict(model.named_modules())
    kept: dict[str, np.ndarray] = {}
    hooks = []
    for i in range(int(getattr(model.config, "num_hidden_layers", 0) or 0)):
        for name, path in sublayers:
            module = modules.get(path.format(i=i))
            if module is not None:  # a module transformers does not name so is not compared

                def keep(_m: Any, _in: Any, out: Any, key: str = f"layers.{i}.{name}") -> None:
                    kept[key] = (out[0] if isinstance(out, tuple) else out).to(dtype).numpy()

                hooks.append(module.register_forward_hook(keep))
    try:
        with torch.no_grad():
            out = st.forward(dict(features))
            kept.clear()  # the sentence-transformers forward ran the same modules: keep one run's
            inputs = {k: v for k, v in features.items() if k in ("input_ids", "token_type_ids", "attention_mask")}
            hs = model(**inputs, output_hidden_states=True).hidden_states
    finally:
        for h in hooks:
            h.remove()
    emb = out["sentence_embedding"].to(dtype).numpy()
    hidden = np.stack([h.to(dtype).numpy() for h in hs])
    return Side(embeddings=emb, last=out["token_embeddings"].to(dtype).numpy(), hidden=hidden, sublayers=kept)


def load_reference(
    root: Path, texts: list[str], *, batch: bool = True, sublayers: tuple[tuple[str, str], ...] = ()
) -> EmbeddingReference:
    """Run sentence-transformers on `texts`, one at a time and (with `batch`) as one padded batch;
    `sublayers`: the modules whose outputs are kept too (`_side`)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no machine here reaches a hub; never wait for one
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        import torch
        import transformers
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise BadInput(
            f"portkit verify on an embedding model needs sentence-transformers: pip install 'portkit[verify]' ({e})"
        ) from None
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    try:
        st = SentenceTransformer(
            str(root),
            device="cpu",
            local_files_only=True,
            trust_remote_code=False,
            model_kwargs={"attn_implementation": "eager"},
        )
    except Exception as e:  # the library's own words: a missing module folder, a bad config
        raise BadInput(
            f"{root}: sentence-transformers cannot load the pipeline: {' '.join(str(e).split())[:300]}"
        ) from None
    st.eval()
    truth_st = copy.deepcopy(st).double()
    name = st.default_prompt_name
    prompt = str((st.prompts or {}).get(name, "")) if name else ""
    prompt_length = 0
    if prompt:
        texts = [prompt + t for t in texts]
        pooling = next((m for m in st if type(m).__name__ == "Pooling"), None)
        if pooling is not None and not getattr(pooling, "include_prompt", True):
            prompt_length = int(st.preprocess([prompt])["attention_mask"].sum()) - 1  # less the closing special token
    encoder: Any = st[0].auto_model  # sentence-transformers' Transformer module holds the model
    cfg = encoder.config
    ref = EmbeddingReference(
        model_type=str(cfg.model_type),
        architecture=type(encoder).__name__,
        steps=_steps(st),
        max_seq_length=st.max_seq_length,
        prompt=prompt,
        texts=tuple(texts),
        single=[],
        batch=_encode(st, texts, prompt_length)[1],
        reference=[],
        truth=[],
        versions={pkg: package_version(pkg) for pkg in ("sentence-transformers", "transformers", "torch")},
    )
    for t in texts:
        features, enc = _encode(st, [t], prompt_length)
        ref.single.append(enc)
        ref.reference.append(_side(st, features, torch.float32, sublayers))
        ref.truth.append(_side(truth_st, features, torch.float64, sublayers))
    if batch:
        features, _ = _encode(st, texts, prompt_length)
        ref.batch_reference = _side(st, features, torch.float32, sublayers)
        ref.batch_truth = rows_alone_where_not_finite(
            _side(truth_st, features, torch.float64, sublayers), ref.batch.mask, ref.truth
        )
    return ref


def rows_alone_where_not_finite(truth: Side, mask: np.ndarray, alone: list[Side]) -> Side:
    """The f64 batch with each row whose sentence embedding is not finite replaced by the same text
    alone in f64 (its embedding and its tokens' outputs). transformers' ModernBERT in f64 gives NaN on
    a padded batch's pad positions, which mean pooling carries into the vector (`NaN * 0`), while
    the attended positions stay finite and equal to the text alone's (within 6e-10 on the tiny
    fixture): the text alone is the same truth, and the row gets a floor measured on it."""
    bad = [
        i
        for i in range(truth.embeddings.shape[0])
        if not np.isfinite(truth.embeddings[i]).all() and np.isfinite(alone[i].embeddings).all()
    ]
    if not bad:
        return truth
    emb, last = truth.embeddings.copy(), truth.last.copy()
    for i in bad:
        keep = mask[i].astype(bool)
        emb[i] = alone[i].embeddings[0]
        if int(keep.sum()) == alone[i].last.shape[1]:
            last[i][keep] = alone[i].last[0]
    return dataclasses.replace(truth, embeddings=emb, last=last)
