"""`portkit verify --candle 0.9.x`: candle 0.9.1 and 0.9.2's own crates (native/ built against each on first
use with its lock in native/releases/X.Y.Z/Cargo.lock and the cargo features that leave out the modules the
release lacks; its capture copies generated from its source, with native/copies/0.9.1/ where 0.9.1's file
differs and 0.10.0's patches where 0.9.2's file is 0.10.0's). Not part of `make test`: `make release-verify`.

- every family whose module the release has agrees with transformers, logits and (where the family has a
  capture copy) every layer and sub-layer;
- a family it lacks (qwen3 on 0.9.1: qwen3.rs arrived in 0.9.2) is one line and exit 2, no runner run;
- a llama chat's second turn: llama.rs 0.9.x builds the mask of a multi-token forward as `(seq_len, seq_len)`
  whatever its cache holds, as 0.10.0-0.10.1 do (PK318, fixed in 0.10.2 by candle#3437): CRASH-CONFIRMED
  by each 0.9.x release's own code;
- a qwen3 batch of two on 0.9.2: qwen3.rs adds its undersized mask on the CPU (PK311), and candle-core
  0.9.2's element-wise binary_map panics reading past it (`read_past_panic`);
- Phi-3.5-style LongRoPE (`rope_scaling` an object): phi3.rs 0.9.1 reads `rope_scaling` as a String, so
  its serde refuses the config (PK112, CRASH-CONFIRMED); 0.11.0 and 0.11.1 load it and apply the factors
  inverted with no attention factor (PK102, CONFIRMED).
"""

from __future__ import annotations

import pytest

from fixtures.families import FAMILY_VARIANTS, family_fixture
from portkit.families import FAMILIES
from tests_releases.verify_cli import AGREEING, path_failure, verdicts, verify

RELEASES = ("0.9.1", "0.9.2")


#: the variant of each family candle runs as transformers does (as tests/native/test_chat_paths.py)
@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_every_family_the_release_has_agrees(family: str, release: str) -> None:
    fam = next(f for f in FAMILIES if f.name == family)
    variant = AGREEING.get(family, "legacy")
    assert variant in FAMILY_VARIANTS[family]
    code, doc, err = verify(family_fixture(family, variant), "--candle", release)
    if not fam.exists.holds(release):
        assert code == 2 and doc == {}, (code, err[-2000:])
        assert len(err.strip().splitlines()) == 1, err
        assert f"candle {release} has no `{family}` module, it arrived in {fam.exists.since}" in err, err
        return
    assert doc.get("versions", {}).get("candle") == release, err[-2000:]
    assert code == 0 and doc["verdict"] == "agree", (code, verdicts(doc), err[-2000:])


@pytest.mark.parametrize("release", RELEASES)
def test_a_llama_second_turn_fails_on_0_9_x(release: str) -> None:
    code, doc, err = verify(family_fixture("llama", "legacy"), "--turns", "--candle", release)
    assert verdicts(doc) == {"PK318": "CRASH-CONFIRMED"}, (code, verdicts(doc), err[-2000:])
    assert "cannot broadcast" in path_failure(doc, "turns"), path_failure(doc, "turns")


def test_a_qwen3_batch_panics_on_0_9_2() -> None:
    from portkit.rules.runtime_paths import read_past_panic

    code, doc, err = verify(family_fixture("qwen3", "legacy"), "--batch", "2", "--candle", "0.9.2")
    assert verdicts(doc) == {"PK311": "CRASH-CONFIRMED"}, (code, verdicts(doc), err[-2000:])
    assert read_past_panic("0.9.2") in path_failure(doc, "batch"), path_failure(doc, "batch")


@pytest.mark.parametrize("release", ["0.9.1", "0.11.0", "0.11.1"])
def test_a_longrope_phi3_is_refused_by_0_9_1_and_loaded_wrong_by_0_11_x(release: str) -> None:
    code, doc, err = verify(family_fixture("phi3", "longrope"), "--candle", release)
    assert doc.get("versions", {}).get("candle") == release, err[-2000:]
    codes = verdicts(doc)
    if release == "0.9.1":  # phi3.rs 0.9.1:41 `rope_scaling: Option<String>`: serde refuses the object
        assert codes.get("PK112") == "CRASH-CONFIRMED" and "PK102" not in codes, (code, codes, err[-2000:])
    else:
        assert codes.get("PK102") == "CONFIRMED" and "PK112" not in codes, (code, codes, err[-2000:])
    assert code == 1, (code, codes)
