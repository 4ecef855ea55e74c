"""`native.weights_kept`: verify's first counterfactual (config.json with a finding's patch) runs on
the tensors its run as written loaded. For every family: the patched run loads no tensor of its
own, and gives the same bits as the same patched run loaded afresh; the load on kept tensors
waits for nothing (`holding_back`); leaving drops them."""

from __future__ import annotations

import json

import numpy as np
import pytest

import portkit_native as pn
from fixtures.families import FAMILIES, family_fixture
from portkit.families import BY_NAME
from portkit.verify.candle.native import holding_back, load_runner, weights_kept
from portkit.verify.candle.run import patched_config, run_candle

TOKENS = 3
#: candle itself refuses gemma3's prefill with 2 KV heads (test_family_runners.py): no run to keep
REFUSED = {"gemma3"}
AGREEING = {family: ("int-window" if family == "mixtral" else "legacy") for family in FAMILIES}


def _runs(family: str):
    d = family_fixture(family, AGREEING[family])
    ids = json.loads((d / "prompt.json").read_text())["ids"]
    files, text = [d / "model.safetensors"], (d / "config.json").read_text()
    patched = patched_config(text, {"rope_theta": 20000.0})

    def run(config_text: str, label: str, forced=None):
        load = lambda: load_runner(BY_NAME[family], files, config_text)  # noqa: E731
        return run_candle(load, ids, forced, TOKENS, label=label)

    return files, text, patched, run


@pytest.mark.parametrize("family", sorted(set(FAMILIES) - REFUSED))
def test_the_patched_run_reuses_the_tensors_and_gives_the_same_bits(family: str) -> None:
    files, text, patched, run = _runs(family)
    with weights_kept(files):
        written = run(text, "as written")
        assert written.ok, written.failure
        kept = pn.kept_tensors()
        assert kept > 0
        on_kept = run(patched, "patched", written.greedy)
        assert pn.kept_tensors() == kept  # nothing loaded again
    assert pn.kept_tensors() == 0
    afresh = run(patched, "patched", written.greedy)
    assert on_kept.ok and afresh.ok
    assert on_kept.greedy == afresh.greedy
    np.testing.assert_array_equal(on_kept.rows, afresh.rows)


def test_a_load_on_kept_tensors_waits_for_nothing() -> None:
    files, text, patched, run = _runs("llama")
    waits: list[int] = []
    with holding_back(lambda: waits.append(1)):
        with weights_kept(files):
            run(text, "as written")
            assert len(waits) == 1
            run(patched, "patched")
            assert len(waits) == 1  # its tensors are resident already
        run(patched, "patched")
        assert len(waits) == 2


def test_other_files_are_not_kept(tmp_path) -> None:
    files, text, _patched, run = _runs("llama")
    other = tmp_path / "model.safetensors"
    other.write_bytes(files[0].read_bytes())
    with weights_kept([other]):
        assert run(text, "as written").ok
        assert pn.kept_tensors() == 0
