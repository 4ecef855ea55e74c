"""The encoder differential, bounded (fixtures/encoder_differential.py; `make fuzz` runs the long
one into docs/encoder-differential.md): lint's prediction (a crash, a difference, neither) against
candle and sentence-transformers on each encoder family's tiny model with config.json mutated,
FN 0 / FP 0. And verify confirms what lint predicts on one case of each numeric kind."""

from __future__ import annotations

import json

import pytest

from fixtures import encoder_differential as D

pytest.importorskip("sentence_transformers")


@pytest.mark.parametrize("family", D.FAMILIES)
def test_lint_predicts_what_candle_does_on_mutated_configs(family):
    outcomes = D.run([family], cases=12)
    wrong = [o.line() for o in outcomes if o.kind]
    assert not wrong, "\n".join(wrong)
    ran = [o for o in outcomes if o.truth != "skipped"]
    assert len(ran) >= 6, [o.line() for o in outcomes]


def test_the_mutations_reach_every_kind_of_truth():
    outcomes = D.run(list(D.FAMILIES), cases=12)
    assert {"crash", "differ", "agree"} <= {o.truth for o in outcomes}
    assert {"PK615", "PK616", "PK617", "PK612", "PK613"} <= {c for o in outcomes for c in o.codes}


@pytest.mark.parametrize(
    ("family", "patch"), [("modernbert", {"norm_eps": 1e-3}), ("nomic_bert", {"layer_norm_eps": 1e-3})]
)
def test_pk617_is_confirmed_by_the_reference_run_with_candles_value(tmp_path, family, patch):
    from portkit.verify.pipeline import VerifyOptions, verify

    base = D.base_dir(family)
    case = D.Case(family, 0, ["by hand"], {**json.loads((base / "config.json").read_text()), **patch})
    d = D._write_case(case, base, tmp_path)
    rep = verify(VerifyOptions(model_dir=d))
    (c,) = [c for c in rep.findings if c.code == "PK617"]
    assert c.verdict == "CONFIRMED", c.evidence
    assert rep.exit_code == 1
