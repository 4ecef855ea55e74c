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
    "modernbert": {"PK612": "CRASH-CONFIRMED", "PK614": "NOT-REACHED"},  # norm_eps, rope_parameters; then the `model.` prefix
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
