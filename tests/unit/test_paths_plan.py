"""verify's plan for a second turn and a batch (`portkit.verify.sections.paths`), torch- and wheel-free:
the inputs it derives, the bad input it refuses, the findings it routes, the reference request
and the reference cache's key."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from fixtures.seams import perturbed_rows
from portkit.findings import Finding
from portkit.rules import RULES
from portkit.verify.errors import BadInput
from portkit.verify.lint import route
from portkit.verify.model_dir import ModelDir
from portkit.verify.reference import cache as refcache
from portkit.verify.reference import extra as refextra
from portkit.verify.sections import paths
from portkit.verify.sections.batch import batch_bytes, rows_for
from portkit.verify.sections.turns import SEGMENT_LEN, segment_for

PROMPT = [1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 5]


def _model(**cfg) -> ModelDir:
    cfg = {
        "vocab_size": 256,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "max_position_embeddings": 128,
        **cfg,
    }
    return ModelDir(root=Path("/nonexistent"), config_text=json.dumps(cfg), config=cfg, weight_files=())


def test_the_segment_and_the_rows_come_from_the_prompt() -> None:
    seg = segment_for(PROMPT)
    assert len(seg) == SEGMENT_LEN >= 8 and seg == PROMPT[1:][::-1][:8]
    assert segment_for([7]) == [7] * 8
    rows = rows_for(PROMPT, 4)
    assert rows[0] == PROMPT and all(len(r) == len(PROMPT) and r[0] == PROMPT[0] for r in rows)
    assert len({tuple(r) for r in rows}) == 4  # different inputs, the same vocabulary
    assert all(sorted(r[1:]) == sorted(PROMPT[1:]) for r in rows)


def test_the_defaults_plan_nothing() -> None:
    p = paths.plan(1, 1, _model(), PROMPT, 8, padded=True)
    assert p.empty and p.reference_request([3, 4]) is None
    target = {"max_tokens": 24, "max_prompt_tokens": 16, "device": "cpu"}
    assert p.lint_target(target) is target


def test_a_second_turn_and_a_batch_extend_lint_target_and_the_request() -> None:
    p = paths.plan(2, 3, _model(), PROMPT, 8, padded=False)
    t = p.lint_target({"max_tokens": 24, "max_prompt_tokens": 16})
    assert t == {"max_tokens": 32, "max_prompt_tokens": 16, "turns": 2, "batch": 3}
    req = p.reference_request([9, 9])
    assert req == {"fed": [9, 9], "segment": list(p.segment), "rows": [list(r) for r in p.rows]}
    # no first answer (candle gave no tokens): the batch's rows only
    assert p.reference_request(None) == {"fed": [], "segment": None, "rows": [list(r) for r in p.rows]}


@pytest.mark.parametrize(
    "turns,batch,message",
    [
        (0, 1, "--turns must be at least 1, got 0"),
        (3, 1, "--turns 3: verify measures one continuation"),
        (1, 0, "--batch must be at least 1, got 0"),
        (1, -2, "--batch must be at least 1, got -2"),
        (1, 4097, "--batch 4097 is more rows than verify runs"),
    ],
)
def test_bad_values(turns: int, batch: int, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        paths.check_options(turns, batch)


def test_a_second_turn_past_the_positions_is_refused() -> None:
    paths.plan(2, 1, _model(max_position_embeddings=32), PROMPT, 8, padded=False)  # ends at 32: fits
    with pytest.raises(
        BadInput, match=r"ends at position 33 \(16 prompt \+ 9 generated \+ 8 tokens\), past max_position_embeddings=32"
    ):
        paths.plan(2, 1, _model(max_position_embeddings=32), PROMPT, 9, padded=False)


def test_a_batch_that_does_not_fit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from portkit.verify.sections import batch

    need = batch_bytes(_model().config, 8, 16, False)
    monkeypatch.setattr(batch, "available_bytes", lambda: need)
    paths.plan(1, 8, _model(), PROMPT, 8, padded=False)
    monkeypatch.setattr(batch, "available_bytes", lambda: need - 1)
    with pytest.raises(BadInput, match="--batch 8: 8 rows of 16 tokens need about"):
        paths.plan(1, 8, _model(), PROMPT, 8, padded=False)
    # the padding-mask forward keeps every position's logits: more memory for the same rows
    assert batch_bytes(_model().config, 8, 16, True) > need
    assert (
        batch_bytes(_model(vocab_size=151936).config, 64, 512, True) > 64 * 2**30
    )  # a Qwen2 vocabulary: every position


def _finding(code: str) -> Finding:
    """A finding as its rule makes it: the probe carries the rule's run (`Rule._probe`)."""
    rule = RULES[code]
    probe = rule._probe("crash", None, None, None, None)
    return Finding(code=code, name="x", message="m", filename="f", severity="error", probe=probe)


def test_findings_go_to_the_run_their_probe_needs() -> None:
    routed = route([_finding("PK301"), _finding("PK309"), _finding("PK313"), _finding("PK312"), _finding("PK501")])
    assert [f.code for f in routed.prompt] == ["PK301"] and [f.code for f in routed.paths] == [
        "PK309",
        "PK313",
        "PK312",
    ]
    assert [f.code for f in routed.tokens] == ["PK501"]
    assert [f.probe.run for f in routed.paths if f.probe] == ["turns", "batch", "padded-batch"]


def test_the_reference_cache_key_holds_the_paths_and_keeps_the_plain_one() -> None:
    c = refcache.RefCache("k" * 64, PROMPT, 8, root=Path("/tmp/none"))
    plain = c.path([5, 6])
    # the plain entry's name is what it was before the paths existed: the digest of the forced ids
    assert plain.name == hashlib.sha256(json.dumps([5, 6]).encode()).hexdigest()[:24] + ".ref"
    turn = c.path([5, 6], refextra.request([5, 6], [1, 2], None))
    batch = c.path([5, 6], refextra.request([5, 6], None, [[1, 2]]))
    assert len({plain, turn, batch}) == 3


def test_extra_arrays_travel_as_layers_and_come_back() -> None:
    layers = {"layer.0": np.zeros((2, 3), np.float32), "extra.turn": np.ones((8, 4), np.float32)}
    kept, extra = refextra.split(layers)
    assert list(kept) == ["layer.0"] and list(extra) == ["turn"]
    moved = perturbed_rows(extra, 1e-3)  # the negative control's seam
    assert moved["turn"][0, 0] == np.float32(1 + 1e-3) and extra["turn"][0, 0] == 1  # a copy
