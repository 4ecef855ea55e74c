"""The f64 truth's embedding and lm_head kept as stored (`stored_vocab`): the rows looked up and the
logits are the ones the same modules give with their weights widened whole, the stored weights
are what the modules hold afterwards, and a module `widen_on_read` cannot handle is left out."""

from __future__ import annotations

import pytest
import torch

from portkit.verify.reference import stored_vocab


class ScaledEmbedding(torch.nn.Embedding):
    """gemma's: its own forward scales the rows, in the weight's dtype."""

    def forward(self, ids):  # type: ignore[override]
        return super().forward(ids) * torch.tensor(48.0**0.5, dtype=self.weight.dtype)


def _modules(stored_dtype, emb_cls=torch.nn.Embedding, bias=True, rows=37, hidden=6):
    gen = torch.Generator().manual_seed(0)
    emb = emb_cls(rows, hidden, padding_idx=rows - 1)
    head = torch.nn.Linear(hidden, rows, bias=bias)
    with torch.no_grad():
        emb.weight.copy_(torch.randn(rows, hidden, generator=gen))
        head.weight.copy_(torch.randn(rows, hidden, generator=gen))
        if bias:
            head.bias.copy_(torch.randn(rows, generator=gen))
    return emb.to(stored_dtype), head.to(stored_dtype)


def _close(got, want) -> bool:
    """Within 1e-13 of the largest |value|: f64 dot products summed in blocks of another size."""
    return bool((got - want).abs().max() <= 1e-13 * want.abs().max())


def _widened(emb, head):
    import copy

    return copy.deepcopy(emb).double(), copy.deepcopy(head).double()


@pytest.mark.parametrize("stored_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("emb_cls", [torch.nn.Embedding, ScaledEmbedding])
def test_rows_and_logits_equal_the_widened_modules(stored_dtype, emb_cls, monkeypatch) -> None:
    monkeypatch.setattr(stored_vocab, "BLOCK_ROWS", 8)  # 37 rows: four whole blocks and a part
    emb, head = _modules(stored_dtype, emb_cls)
    want_emb, want_head = _widened(emb, head)
    stored_weight = emb.weight
    stored_vocab.widen_on_read(torch, [emb, head], torch.float64)
    ids = torch.tensor([[5, 36, 5, 0, 17, 36, 2]])  # repeats, and the padding id
    with torch.inference_mode():
        rows = emb(ids)
        logits = head(rows)
        want_rows = want_emb(ids)
        want_logits = want_head(want_rows)
    assert rows.dtype == logits.dtype == torch.float64
    assert torch.equal(rows, want_rows)
    assert _close(logits, want_logits)
    # negative control: logits off by 1e-3 of themselves are caught by the same comparison
    assert not _close(logits * (1 + 1e-3), want_logits)
    # the modules hold their stored weights again, padding id included
    assert emb.weight is stored_weight and emb.weight.dtype == stored_dtype and emb.padding_idx == 36
    assert head.weight.dtype == stored_dtype


def test_a_tied_head_reads_the_embeddings_weight() -> None:
    emb, head = _modules(torch.float32, bias=False)
    head.weight = emb.weight
    want_emb, _ = _widened(emb, head)
    stored_vocab.widen_on_read(torch, [emb, head], torch.float64)
    x = torch.randn(1, 3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        assert _close(head(x), x @ want_emb.weight.T)
        emb(torch.tensor([[1, 2]]))
    assert head.weight is emb.weight


class _Model(torch.nn.Module):
    def __init__(self, emb, head) -> None:
        super().__init__()
        self.emb, self.head = emb, head

    def get_input_embeddings(self):
        return self.emb

    def get_output_embeddings(self):
        return self.head


def test_only_plain_modules_are_kept_as_stored() -> None:
    emb, head = _modules(torch.float32)
    assert stored_vocab.vocab_modules(torch, _Model(emb, head)) == [emb, head]
    # max_norm rewrites the rows it looks up: widened whole instead
    renormed = torch.nn.Embedding(4, 6, max_norm=1.0)
    assert stored_vocab.vocab_modules(torch, _Model(renormed, head)) == [head]
    # no lm_head (a base model), or one that is not a Linear
    assert stored_vocab.vocab_modules(torch, _Model(emb, None)) == [emb]
    assert stored_vocab.vocab_modules(torch, _Model(emb, torch.nn.Identity())) == [emb]


class _Unsaid(torch.nn.Module):
    def get_input_embeddings(self):
        raise NotImplementedError

    def get_output_embeddings(self):
        return None


def test_a_model_that_does_not_say_its_vocab_keeps_none() -> None:
    assert stored_vocab.vocab_modules(torch, _Unsaid()) == []


class FailingEmbedding(torch.nn.Embedding):
    def forward(self, ids):  # type: ignore[override]
        raise RuntimeError("boom")


def test_the_stored_weight_is_back_when_the_forward_fails() -> None:
    emb, _head = _modules(torch.bfloat16, FailingEmbedding)
    stored = emb.weight
    stored_vocab.widen_on_read(torch, [emb], torch.float64)
    with pytest.raises(RuntimeError, match="boom"):
        emb(torch.tensor([[1, 2]]))
    assert emb.weight is stored and emb.padding_idx == 36


def _mixed_checkpoint(tmp_path, vocab_dtype, layer_dtype):
    """A one-layer llama whose embedding and lm_head are stored in `vocab_dtype` and whose
    decoder layer (and final norm) in `layer_dtype`; returns its directory, weight file and
    the stored embedding."""
    from safetensors.torch import load_file, save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    tensors = load_file(path)
    vocab = ("model.embed_tokens.weight", "lm_head.weight")
    tensors = {k: v.to(vocab_dtype if k in vocab else layer_dtype).contiguous() for k, v in tensors.items()}
    save_file(tensors, path, metadata={"format": "pt"})
    return tmp_path, path, tensors["model.embed_tokens.weight"]


@pytest.mark.parametrize(
    "stored,expected",
    [
        (["F32", "BF16"], "float32"),
        (["BF16", "F32", "BF16"], "float32"),
        (["F16", "BF16"], "float32"),
        (["BF16"], "bfloat16"),
        (["F16", "F16"], "float16"),
        (["F32"], "float32"),
    ],
)
def test_the_vocab_dtype_is_the_one_all_tensors_share_else_f32(stored: list[str], expected: str) -> None:
    """Embedding and lm_head stored in F32 beside BF16 layers: the truth's vocabulary stays F32; taking
    any one of several stored dtypes would round the vocabulary to it."""
    from portkit.verify.reference.models import vocab_dtype

    assert vocab_dtype(stored) == expected


def test_the_truth_keeps_an_f32_vocab_beside_bf16_layers_in_f32(tmp_path) -> None:
    """The same choice through the real loader, on a one-layer llama whose embedding and lm_head are F32
    and whose layers are BF16: the truth's embedding is the stored F32 rows, bit for bit."""
    from portkit.verify.reference import models

    d, path, stored = _mixed_checkpoint(tmp_path, torch.float32, torch.bfloat16)
    m = models.StreamedModel(d, [path], scan_nonfinite=False, precision="float64")
    assert m.widen and m.vocab  # the truth keeps its vocab as stored: the choice under test is made
    assert m.vocab_dtype == torch.float32
    emb = m.model.get_input_embeddings().weight
    assert emb.dtype == torch.float32 and torch.equal(emb, stored)
    # negative control: the stored F32 rows are not BF16 values; rounding them would show
    assert not torch.equal(stored.to(torch.bfloat16).float(), stored)


def test_the_truth_keeps_an_all_bf16_vocab_in_bf16(tmp_path) -> None:
    """Every tensor stored in BF16: the truth's vocab modules hold BF16 (half the memory of F32,
    the same values), widened where a forward reads them."""
    from portkit.verify.reference import models

    d, path, stored = _mixed_checkpoint(tmp_path, torch.bfloat16, torch.bfloat16)
    m = models.StreamedModel(d, [path], scan_nonfinite=False, precision="float64")
    assert m.widen and m.vocab
    assert m.vocab_dtype == torch.bfloat16
    emb = m.model.get_input_embeddings().weight
    assert emb.dtype == torch.bfloat16 and torch.equal(emb, stored)
