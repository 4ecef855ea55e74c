"""verify on tiny embedding models of five encoder families (fixtures.embedding_models), each as
transformers 5 saves it and as its clean twin (the keys and names candle's module needs): the
config findings are CRASH-CONFIRMED by candle's own load error on the first and absent on the
twin, which agrees with sentence-transformers text by text and in one padded batch, where the
counterfactual programs (no mask passed, pooling over pads) confirm PK611 and PK602."""

from __future__ import annotations

import pytest

from fixtures.embedding_models import FAMILIES, embedding_model

#: what each family's checkpoint, as transformers 5.24 saves it, gets from candle 0.11.0
AS_SAVED = {
    "bert": {},
    "distilbert": {},
    "xlm_roberta": {"PK612": "CRASH-CONFIRMED"},  # no position_embedding_type
    "modernbert": {
        "PK612": "CRASH-CONFIRMED",
        "PK614": "NOT-REACHED",
    },  # norm_eps, rope_parameters; then the `model.` prefix
    "nomic_bert": {"PK613": "CRASH-CONFIRMED"},  # n_embd... defaulted to 768
}
CONFIG_CODES = {"PK612", "PK613", "PK614"}


def _verify(path):
    from portkit.verify.pipeline import VerifyOptions, verify

    return verify(VerifyOptions(model_dir=path))


@pytest.mark.parametrize("family", FAMILIES)
def test_as_transformers_saves_it(family):
    rep = _verify(embedding_model(family))
    assert rep.family == family
    got = {c.code: c.verdict for c in rep.findings if c.code in CONFIG_CODES}
    assert got == AS_SAVED[family]
    assert rep.exit_code == (1 if AS_SAVED[family] else 0), rep.verdict()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_clean_twin_agrees_and_the_programs_that_differ_are_confirmed(family):
    rep = _verify(embedding_model(family, twin=True))
    assert rep.exit_code == 0, rep.verdict()
    by = {c.code: c for c in rep.findings}
    assert not CONFIG_CODES & set(by)
    assert all(r.ok for r in rep.singles) and rep.batch is not None and rep.batch.ok and rep.batch.padded_rows >= 4
    assert by["PK611"].verdict == "CONFIRMED" and by["PK602"].verdict == "CONFIRMED"
    for cf in rep.counterfactuals:
        assert cf.differs, cf.name


#: (family, config.json keys set on the twin) -> the verdict lint's activation findings get; the
#: clean member of each pair computes what transformers computes and agrees
ACTIVATION_CASES = [
    ("distilbert", {"activation": "gelu"}, {"PK616": "CONFIRMED"}),  # distilbert.rs: `gelu` is the tanh form
    ("distilbert", {"activation": "relu"}, {}),
    ("modernbert", {"hidden_activation": "silu"}, {"PK616": "CONFIRMED"}),  # modernbert.rs: always GELU
    ("modernbert", {"hidden_activation": "gelu"}, {}),
    ("nomic_bert", {"hidden_act": "gelu"}, {"PK616": "CONFIRMED"}),  # nomic_bert.rs: always SiLU
    ("nomic_bert", {"hidden_act": "silu"}, {}),
    ("bert", {"hidden_act": "gelu_new"}, {"PK615": "CRASH-CONFIRMED"}),  # bert.rs: gelu, geluapproximate, relu
    ("bert", {"hidden_act": "relu"}, {}),
]


@pytest.mark.parametrize(
    ("family", "config", "expected"),
    ACTIVATION_CASES,
    ids=lambda v: str(v) if not isinstance(v, dict) else "-".join(map(str, v.values())) or "clean",
)
def test_an_activation_candle_computes_otherwise_is_confirmed_by_the_reference_run_as_candle_reads_it(
    family, config, expected
):
    rep = _verify(embedding_model(family, twin=True, config=config))
    got = {c.code: c.verdict for c in rep.findings if c.code in ("PK615", "PK616")}
    assert got == expected, [(c.code, c.evidence) for c in rep.findings if c.code in ("PK615", "PK616")]
    assert rep.exit_code == (1 if expected else 0), rep.verdict()
    if "PK616" in expected:
        (cf,) = rep.references
        assert cf.agrees and not all(r.ok for r in rep.singles)
        assert (
            cf.patch == next(c for c in rep.findings if c.code == "PK616").details["counterfactual_reference"]["patch"]
        )


def test_a_wrong_belief_about_what_candle_computes_is_not_confirmed(monkeypatch):
    """Negative control: were portkit to believe distilbert.rs computes silu for `gelu`, the reference
    run with silu would not match candle either, and PK616 must read NOT-REPRODUCED."""
    from dataclasses import replace

    from portkit.encoders import ACTIVATIONS

    monkeypatch.setitem(
        ACTIVATIONS, "distilbert", replace(ACTIVATIONS["distilbert"], computes={"gelu": "silu", "relu": "relu"})
    )
    rep = _verify(embedding_model("distilbert", twin=True, config={"activation": "gelu"}))
    (c,) = [c for c in rep.findings if c.code == "PK616"]
    assert c.verdict == "NOT-REPRODUCED" and "differs from both" in c.evidence, c.evidence


@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_bert_in_f16_is_nan_and_confirmed_where_other_modules_are_not(family):
    """PK618: bert.rs's `(1 - mask) * f32::MIN` is NaN in f16; distilbert.rs masks with
    `masked_fill` and stays finite (the negative control); neither fires at f32."""
    from portkit.verify.pipeline import VerifyOptions, verify

    d = embedding_model(family, twin=True)
    rep = verify(VerifyOptions(model_dir=d, dtype="f16"))
    got = {c.code: c for c in rep.findings}
    nonfinite = [r.nonfinite for r in rep.singles]
    if family == "bert":
        assert all(nonfinite) and got["PK618"].verdict == "CONFIRMED", got["PK618"].evidence
        assert got["PK611"].verdict == "NOT-REACHED"  # NaN vectors tell no program apart
        assert rep.exit_code == 3
    else:
        assert not any(nonfinite) and "PK618" not in got
    assert "PK618" not in {c.code for c in _verify(d).findings}


def test_xlm_roberta_in_f16_runs_and_agrees():
    """xlm_roberta.rs:536 panics for a dtype other than f32/f64, but `XLMRobertaModel::forward` asks
    it for F32 only (xlm_roberta.rs:383) and casts the finished mask to the scores' dtype (:165):
    f16 runs, its mask stays finite where it attends, and the embeddings agree. No rule fires."""
    from portkit.verify.pipeline import VerifyOptions, verify

    rep = verify(VerifyOptions(model_dir=embedding_model("xlm_roberta", twin=True), dtype="f16"))
    assert rep.exit_code == 0, rep.verdict()
    assert all(r.failure is None and not r.nonfinite for r in rep.singles + rep.batch.rows)
    assert not {"PK618", "PK619"} & {c.code for c in rep.findings}


def test_a_roberta_checkpoint_through_bert_rs_is_confirmed(monkeypatch):
    """PK620: bert.rs loads the XLM-R twin and counts positions from 0; xlm_roberta.rs agrees. The
    negative control: were the program's module xlm_roberta.rs itself, PK620 reads NOT-REPRODUCED."""
    from portkit.verify.embedding import run

    d = embedding_model("xlm_roberta", twin=True)
    rep = _verify(d)
    by = {c.code: c for c in rep.findings}
    (cf,) = [c for c in rep.counterfactuals if c.name == "bert-module"]
    assert rep.exit_code == 0 and cf.differs and cf.worst_cosine < 0.99
    assert by["PK620"].verdict == "CONFIRMED", by["PK620"].evidence
    monkeypatch.setattr(run, "WRONG_MODULE", "xlm_roberta")
    rep = _verify(d)
    (c,) = [c for c in rep.findings if c.code == "PK620"]
    assert c.verdict == "NOT-REPRODUCED", c.evidence
    assert "PK620" not in {c.code for c in _verify(embedding_model("bert", twin=True)).findings}


def test_an_embedding_model_with_nan_reads_non_finite_in_a_multi_target_summary(capsys):
    """The summary of several targets speaks one word for one outcome: an encoder whose f16 embeddings
    are NaN (bert.rs's mask, PK618) is `non-finite` with exit 3, as a decoder's NaN is
    (`portkit.verify.outcome`), never a second spelling."""
    import json

    from portkit.verify.cli import main
    from portkit.verify.outcome import EXIT_NONFINITE, NONFINITE

    bert, distilbert = embedding_model("bert", twin=True), embedding_model("distilbert", twin=True)
    code = main([str(bert), str(distilbert), "--dtype", "f16", "--format", "json"])
    summary = {s["target"]: s for s in json.loads(capsys.readouterr().out)["summary"]}
    assert summary[str(bert)]["verdict"] == NONFINITE == "non-finite"
    assert summary[str(bert)]["exit_code"] == EXIT_NONFINITE == 3 and code == 3
    assert summary[str(distilbert)]["verdict"] != NONFINITE
