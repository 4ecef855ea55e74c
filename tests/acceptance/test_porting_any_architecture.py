"""`portkit reference` and `portkit compare` over transformers 5's whole causal-LM mapping.

Each model type is built tiny here (`fixtures.tiny_models`: seeded random weights, sizes of a few
thousand parameters, and only if transformers itself runs it), then: the reference writes every
decoder layer, the final norm and the logits; compare of the reference with itself exits 0; and
with layer.1's output scaled by 1 + 1e-3 it exits 1 and names layer.1. The types that cannot be
built small, and the ones the reference refuses, are listed below with why; a type this
transformers has that neither list knows must build and pass (a new transformers' types are
held to the same, not skipped).
"""

from __future__ import annotations

import numpy as np
import pytest
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from fixtures.tiny_models import NotSmall, build
from portkit.porting.compare import compare_dumps
from portkit.porting.dumpfile import TRUTH, DumpFile, read_dump
from portkit.verify.errors import BadInput

#: transformers 5.25's causal-LM types that `fixtures.tiny_models` cannot build small, and why
#: (what `NotSmall`'s text says: checked, so that a type that now builds leaves this list)
NOT_SMALL = {
    # the config's own validation refuses the sizes (its layer-type pattern, its token ids, its layer counts)
    **dict.fromkeys(
        [
            "bamba", "dots3_note", "gpt_neo", "granitemoehybrid", "kolibri1_1", "mamba2", "musicgen",
            "musicgen_melody", "prophetnet", "xlnet", "zamba", "zamba2", "zaya",
        ],
        "its config refuses the small sizes",
    ),
    "gemma4_assistant": "its default config fails its own validation",
    # a sub-config or sub-module cannot be built from these sizes (gemma3n's vision tower needs timm)
    **dict.fromkeys(
        [
            "blt", "cohere_compass_text", "dbrx", "dots1", "gemma3n", "gemma3n_text", "git", "lfm2_moe", "moshi",
            "mpt", "phi4_multimodal", "reformer",
        ],
        "transformers cannot build it small",
    ),
    # a vision or audio part, or an embedding table, keeps its own sizes
    **dict.fromkeys(
        [
            "cpmant", "ergo", "gemma3", "got_ocr2", "inkling2_loop_text", "inkling2_text", "kimi_linear",
            "moss_transcribe_diarize", "roc_bert",
        ],
        "parameters at the small sizes",
    ),
    # transformers' own generate() fails on the tiny model (its cache, its shapes, a language to set)
    **dict.fromkeys(
        ["bailing_hybrid", "dory", "gemma4_unified_assistant", "jamba", "qwen4_exp", "qwen4_exp_text", "xlstm", "xmod"],
        "transformers itself cannot run it",
    ),
}  # fmt: skip

#: types the reference refuses with one line, and what the line says
REFUSED = {
    "hrm_text": "2 lists could each be its decoder layers",  # two recurrent stacks run in turn
    "xlm": "4 lists could each be its decoder layers",  # attentions, ffns and norms in parallel lists
}

IDS = "3,4,5,6,7,8"
PERTURBATION = 1e-3


def _candidate(ref: DumpFile, scale_layer: str | None) -> DumpFile:
    """The reference's own values (its reference-only ones left out), `scale_layer` scaled by 1 + 1e-3."""
    tensors = {
        k: (v * np.float32(1 + PERTURBATION)).astype(np.float32) if k == scale_layer else v
        for k, v in ref.tensors.items()
        if not k.startswith(TRUTH) and k != "greedy.logits"
    }
    return DumpFile(ref.path.with_name("candidate.safetensors"), tensors)


def _layers(model_dir) -> int:
    """The decoder layers the config declares (LongCat-Flash's `num_layers`: its
    `num_hidden_layers` counts the two attention/MLP pairs in each)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir).get_text_config()
    return config.num_layers if config.model_type == "longcat_flash" else config.num_hidden_layers


@pytest.mark.parametrize("model_type", sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES))
def test_reference_and_compare_on_every_causal_lm_type(model_type, tmp_path):
    from portkit.porting.reference import write

    try:
        model_dir = build(model_type, tmp_path / "model")
    except NotSmall as e:
        if model_type not in NOT_SMALL:
            pytest.fail(f"{model_type} does not build small and is in no list: {e}")
        assert NOT_SMALL[model_type] in str(e), str(e)
        return
    assert model_type not in NOT_SMALL, f"{model_type} builds small now: take it off NOT_SMALL"
    out = tmp_path / "ref.safetensors"
    if model_type in REFUSED:
        with pytest.raises(BadInput, match=REFUSED[model_type]) as refused:
            write(model_dir, out, ids=IDS, tokens=2)
        assert "\n" not in str(refused.value)
        return
    write(model_dir, out, ids=IDS, tokens=2)
    ref = read_dump(out)
    layers = [f"layer.{i}" for i in range(_layers(model_dir))]
    assert {*layers, "embeddings", "norm", "logits", "greedy"} <= set(ref.tensors), sorted(ref.tensors)
    assert compare_dumps(ref, _candidate(ref, None)).exit_code == 0
    perturbed = compare_dumps(ref, _candidate(ref, "layer.1"))
    assert perturbed.exit_code == 1 and perturbed.first_bad == "layer.1", perturbed.first_bad


#: the classic layouts many ports start from: blocks in `transformer.h`, norms named `ln_f`,
#: `final_layernorm`, `final_layer_norm`
CLASSIC = ("phi", "gpt2", "gptj", "gpt_neox", "bloom", "falcon")


@pytest.mark.parametrize("model_type", CLASSIC)
def test_classic_layouts_streamed_equal_whole_and_name_their_modules(model_type, tmp_path):
    """Streamed (one layer's weights at a time, checkpoint names grouped by the layers' own list
    name) gives the whole model's values bit for bit; sub-layers are transformers' module paths."""
    from portkit.porting.reference import write

    model_dir = build(model_type, tmp_path / "model")
    refs = {}
    for mode in ("whole", "streamed"):
        write(model_dir, tmp_path / f"{mode}.safetensors", ids=IDS, tokens=3, mode=mode)
        refs[mode] = read_dump(tmp_path / f"{mode}.safetensors")
    whole, streamed = refs["whole"].tensors, refs["streamed"].tensors
    assert list(whole) == list(streamed)
    for name, value in whole.items():
        assert np.array_equal(value, streamed[name]), name
    subs = [n.removeprefix("layer.0.") for n in whole if n.startswith("layer.0.")]
    assert subs == SUB_LAYERS[model_type]
    # streamed means one layer's checkpoint tensors at a time: each layer's are a group of their own
    from portkit.verify.reference.models import StreamedModel

    model = StreamedModel(model_dir, [model_dir / "model.safetensors"], scan_nonfinite=False)
    assert sorted(k for k in model.groups if k is not None) == [0, 1]


#: each classic layout's decoder layer, as transformers names its modules, in computation order
SUB_LAYERS = {
    # a family of portkit's: the names its SUBLAYERS trait gives (what portkit-dump's ports put)
    "phi": ["input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn", "mlp"],
    "gpt2": ["ln_1", "attn.c_attn", "attn.c_proj", "attn", "ln_2", "mlp.c_fc", "mlp.c_proj", "mlp"],
    "gptj": ["ln_1", "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj", "attn", "mlp.fc_in",
             "mlp.fc_out", "mlp"],
    "gpt_neox": ["input_layernorm", "attention.query_key_value", "attention.dense", "attention",
                 "post_attention_layernorm", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", "mlp"],
    "bloom": ["input_layernorm", "self_attention.query_key_value", "self_attention.dense", "self_attention",
              "post_attention_layernorm", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", "mlp"],
    "falcon": ["input_layernorm", "self_attention.query_key_value", "self_attention.dense", "self_attention",
               "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", "mlp"],
}  # fmt: skip


def test_a_layer_no_checkpoint_name_says_is_loaded_once_and_kept(tmp_path, monkeypatch):
    """Should a layer's tensors be named other than by its list (a conversion's own names), the
    streamed reference loads them with the rest and keeps them: its values are still the whole model's."""
    import re

    from portkit.porting.reference import write
    from portkit.verify.reference import anatomy

    model_dir = build("gpt2", tmp_path / "model")
    write(model_dir, tmp_path / "whole.safetensors", ids=IDS, tokens=3, mode="whole")
    monkeypatch.setattr(anatomy, "layer_key", lambda _path: re.compile(r"(?!)(\d)"))
    write(model_dir, tmp_path / "streamed.safetensors", ids=IDS, tokens=3, mode="streamed")
    whole, streamed = read_dump(tmp_path / "whole.safetensors"), read_dump(tmp_path / "streamed.safetensors")
    assert all(np.array_equal(v, streamed.tensors[k]) for k, v in whole.tensors.items())


def test_a_port_that_rotates_the_whole_head_is_localised_in_gpt_neox(tmp_path):
    """GPT-NeoX rotates a quarter of each head (`partial_rotary_factor` 0.25); transformers with
    the factor 1.0 plays a port that rotates all of it: compare names the attention's output
    projection, with q/k/v agreeing and position 0 agreeing (rotation angle 0 there)."""
    import json

    from portkit.porting.reference import write

    model_dir = build("gpt_neox", tmp_path / "model")
    port = tmp_path / "port"
    port.mkdir()
    for f in model_dir.iterdir():
        (port / f.name).write_bytes(f.read_bytes())
    config = json.loads((port / "config.json").read_text())
    assert config["rope_parameters"]["partial_rotary_factor"] == 0.25
    config["rope_parameters"]["partial_rotary_factor"] = 1.0
    (port / "config.json").write_text(json.dumps(config))
    write(model_dir, tmp_path / "ref.safetensors", ids=IDS, tokens=2)
    write(port, tmp_path / "port.safetensors", ids=IDS, tokens=2)
    res = compare_dumps(read_dump(tmp_path / "ref.safetensors"), read_dump(tmp_path / "port.safetensors"))
    loc = res.comparison.localisation
    assert res.exit_code == 1 and res.first_bad == "layer.0.attention.dense"
    assert loc is not None and loc.agreeing[-2:] == ["layer.0.input_layernorm", "layer.0.attention.query_key_value"]
    assert loc.position0_agrees and "rotary embedding" in loc.diagnosis
    # the negative control: the same model as the port agrees with itself
    same = read_dump(tmp_path / "port.safetensors")
    assert compare_dumps(same, same).exit_code == 0


def test_a_sub_layer_with_no_role_gets_no_diagnosis(tmp_path):
    """GPT-2's `mlp.c_fc` says nothing portkit reasons about: compare names it first, and says so."""
    from portkit.porting.reference import write

    write(build("gpt2", tmp_path / "model"), tmp_path / "ref.safetensors", ids=IDS, tokens=2)
    ref = read_dump(tmp_path / "ref.safetensors")
    names = [n for n in ref.tensors if not n.startswith(TRUTH) and n != "greedy.logits"]
    start = names.index("layer.1.mlp.c_fc")
    scaled = {n for n in names[start:] if n not in ("greedy", "ids")}
    cand = DumpFile(
        tmp_path / "cand.safetensors",
        {n: (ref.tensors[n] * np.float32(1.01)).astype(np.float32) if n in scaled else ref.tensors[n] for n in names},
    )
    res = compare_dumps(ref, cand)
    assert res.first_bad == "layer.1.mlp.c_fc"
    assert res.comparison.localisation.diagnosis.endswith("no diagnosis for this sub-layer")


def test_moe_routing_is_recorded(tmp_path):
    """OLMoE's router (a type portkit has no family for, so every module is recorded): its logits
    per token and the experts each token chose (ascending)."""
    from portkit.porting.reference import write

    write(build("olmoe", tmp_path / "model"), tmp_path / "ref.safetensors", ids=IDS, tokens=2)
    ref = read_dump(tmp_path / "ref.safetensors")
    logits, chosen = ref.tensors["layer.0.mlp.gate"], ref.tensors["layer.0.mlp.gate.chosen"]
    assert logits.shape == (6, 4) and chosen.shape == (6, 2)
    top = np.sort(np.argsort(-logits, axis=-1)[:, :2], axis=-1)
    assert np.array_equal(chosen, top.astype(np.float32))


@pytest.mark.parametrize(
    ("model_type", "says"),
    [
        ("gemma3", "gemma3 is multimodal (vision_config beside its language model)"),
        ("bart", "bart is an encoder-decoder checkpoint"),
    ],
)
def test_what_the_reference_does_not_record_is_one_line(model_type, says, tmp_path, capsys):
    """A multimodal or encoder-decoder checkpoint: one line and exit 2, before any weight is read."""
    from safetensors.numpy import save_file
    from transformers import AutoConfig

    from portkit.cli import main

    AutoConfig.for_model(model_type).save_pretrained(tmp_path)
    save_file({"x": np.zeros(1, dtype=np.float32)}, str(tmp_path / "model.safetensors"))
    code = main(["reference", str(tmp_path), "--out", str(tmp_path / "ref.safetensors"), "--ids", IDS])
    err = capsys.readouterr().err.strip()
    assert code == 2 and says in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("model_type", ["bert", "roberta", "distilbert", "modernbert", "electra"])
def test_encoders(model_type, tmp_path):
    """An encoder (`AutoModel`, no head): the reference writes what enters the first layer, every
    layer and its modules, no logits; compare of itself exits 0, with layer.1 scaled it names layer.1."""
    from fixtures.tiny_models import build_encoder
    from portkit.porting.reference import write

    model_dir = build_encoder(model_type, tmp_path / "model")
    written = write(model_dir, tmp_path / "ref.safetensors", ids=IDS, tokens=8)
    ref = read_dump(tmp_path / "ref.safetensors")
    assert written.metadata["tokens"] == "0" and "encoder" in written.metadata["runtime"]
    assert {"ids", "embeddings", "layer.0", "layer.1"} <= set(ref.tensors)
    assert not {"logits", "greedy"} & set(ref.tensors) and f"{TRUTH}layer.1" in ref.tensors
    assert ref.tensors["embeddings"].shape == ref.tensors["layer.0"].shape
    assert compare_dumps(ref, _candidate(ref, None)).exit_code == 0
    perturbed = compare_dumps(ref, _candidate(ref, "layer.1"))
    assert perturbed.exit_code == 1 and perturbed.first_bad == "layer.1", perturbed.first_bad
