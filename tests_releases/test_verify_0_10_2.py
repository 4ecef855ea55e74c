"""`portkit verify --candle 0.10.2`: candle 0.10.2's own crates (native/ built against them on first use,
its lock native/releases/0.10.2/Cargo.lock, its capture copies generated from its source and
native/copies/0.10.2/). Not part of `make test`, whose fresh run has no time for a third candle build:
`make release-verify` runs these.

- every family's legacy fixture agrees with transformers on 0.10.2, logits and (where the family has
  a capture copy) every layer and sub-layer: the copies generated for 0.10.2 compute what its modules do;
- a qwen3 batch of two: 0.10.2's qwen3 adds its undersized mask on the CPU too (no CPU flash-attention
  path before 0.11.0), so the batch panics, which PK311 predicts there and verify CRASH-CONFIRMS; on
  0.11.0 the CPU builds no mask and the rows agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fixtures.families import FAMILY_VARIANTS, family_fixture
from portkit.families import FAMILIES, by_name

RELEASE = "0.10.2"
#: the variant of each family candle runs as transformers does (as tests/native/test_chat_paths.py)
AGREEING = {"mixtral": "int-window", "gemma3": "kv-heads-1"}


def _verify(*argv: object) -> tuple[int, dict, str]:
    proc = subprocess.run([sys.executable, "-m", "portkit", "verify", *map(str, argv), "--format", "json"],
                          capture_output=True, text=True, env=dict(os.environ), timeout=3000)  # fmt: skip
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, doc, proc.stderr


def _codes(doc: dict) -> dict[str, str]:
    sections = (doc.get("paths") or {}).get("sections", [])
    return {
        f["code"]: f["verdict"]
        for f in [*doc.get("findings", []), *(f for s in sections for f in s.get("findings", []))]
    }


@pytest.mark.parametrize("family", [f.name for f in FAMILIES if by_name(f.name).exists.holds(RELEASE)])
def test_every_family_agrees_on_0_10_2(family: str) -> None:
    variant = AGREEING.get(family, "legacy")
    assert variant in FAMILY_VARIANTS[family]
    code, doc, err = _verify(family_fixture(family, variant), "--candle", RELEASE)
    assert doc.get("versions", {}).get("candle") == RELEASE, err[-2000:]
    assert code == 0 and doc["verdict"] == "agree", (code, _codes(doc), err[-2000:])


def test_a_qwen3_batch_panics_on_0_10_2_and_agrees_on_0_11_0() -> None:
    d = family_fixture("qwen3", "legacy")
    code, doc, err = _verify(d, "--batch", "2", "--candle", RELEASE)
    assert _codes(doc) == {"PK311": "CRASH-CONFIRMED"}, (code, _codes(doc), err[-2000:])
    batch = [c for s in doc["paths"]["sections"] for c in s["checks"] if c["path"] == "batch"]
    assert batch and "index out of bounds" in batch[0]["run"]["failure"]["message"], batch
    code, doc, err = _verify(d, "--batch", "2", "--candle", "0.11.0")
    assert "PK311" not in _codes(doc) and code == 0, (code, _codes(doc), err[-2000:])
