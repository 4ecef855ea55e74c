"""PK308's repair as the native wheel runs it: a config.json carrying `portkit_candle_patch`
runs candle's mixtral.rs with its routing weights cast to the activations' dtype
(native/src/mixtral_copy.rs). At f32 the cast is a no-op, so its logits equal the library's bit
for bit (the same kernels on the same inputs in one process); at f16 the library fails with
PK308's message and the copy runs; any other program is refused with one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import portkit_native as pn
from fixtures.families import family_fixture
from portkit.families import CANDLE_PATCH_KEY, MIXTRAL_ROUTING_IN_DTYPE

IDS = [5, 17, 33, 2, 88, 41, 7]


@pytest.fixture(scope="module")
def mixtral() -> tuple[list[str], str, str]:
    d = family_fixture("mixtral", "int-window")  # candle reads sliding_window as a usize
    config = (d / "config.json").read_text()
    repaired = json.dumps({**json.loads(config), CANDLE_PATCH_KEY: MIXTRAL_ROUTING_IN_DTYPE})
    return [str(d / "model.safetensors")], config, repaired


def test_at_f32_the_repaired_program_is_the_library_bit_for_bit(mixtral) -> None:
    files, config, repaired = mixtral
    library = np.asarray(pn.FamilyRunner("mixtral", files, config).teacher_forced_logits(IDS, 3))
    copy = np.asarray(pn.FamilyRunner("mixtral", files, repaired).teacher_forced_logits(IDS, 3))
    assert library.shape == (len(IDS) - 2, copy.shape[1]) and np.array_equal(library, copy)


def test_at_f16_the_library_fails_with_pk308s_message_and_the_repair_runs(mixtral) -> None:
    files, config, repaired = mixtral
    with pytest.raises(pn.CandleError, match="dtype mismatch in mul, lhs: F16, rhs: F32"):
        pn.FamilyRunner("mixtral", files, config, dtype="f16").last_logits(IDS)
    logits = np.asarray(pn.FamilyRunner("mixtral", files, repaired, dtype="f16").last_logits(IDS))
    assert np.isfinite(logits).all()


def test_an_unknown_program_or_another_family_is_refused(mixtral) -> None:
    files, config, _ = mixtral
    unknown = json.dumps({**json.loads(config), CANDLE_PATCH_KEY: "faster-please"})
    with pytest.raises(ValueError, match="is not a program portkit has for mixtral"):
        pn.FamilyRunner("mixtral", files, unknown)
    d = family_fixture("mistral", "legacy")
    other = json.dumps({**json.loads((d / "config.json").read_text()), CANDLE_PATCH_KEY: MIXTRAL_ROUTING_IN_DTYPE})
    with pytest.raises(ValueError, match="is not a program portkit has for mistral"):
        pn.FamilyRunner("mistral", [str(d / "model.safetensors")], other)
