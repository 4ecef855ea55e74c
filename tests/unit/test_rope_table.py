"""PK317's arithmetic: candle's half-precision RoPE table as `portkit.verify.reference.rope_table`
emulates it, and the closed form lint's message quotes (`portkit.rules.runtime.position_error`).

Exact values only where the dtype defines them (bf16(1001) = 1000, f16(2049) = 2048); the rest are
bounds, each with a negative control that must fail it."""

from __future__ import annotations

import numpy as np
import pytest

from portkit.families import FAMILIES
from portkit.rules import RULES
from portkit.rules.runtime import position_error
from portkit.verify.reference.rope_table import FIRST_ROUNDED, candle_angles, round_to, table_error


def test_the_rule_names_the_families_whose_module_builds_the_table_in_the_model_dtype() -> None:
    with_trait = {f.name for f in FAMILIES if f.traits.rope_table_in_model_dtype}
    assert set(RULES["PK317"].families) == with_trait
    assert not with_trait & {
        "llama",
        "qwen3",
        "mistral",
        "granite",
    }  # F32, then cast (llama.rs:200-207, qwen3.rs:50-57)


def test_rounding_is_the_dtypes() -> None:
    assert round_to(1001, "bf16") == 1000 and round_to(256, "bf16") == 256 and round_to(257, "bf16") == 256
    assert round_to(2048, "f16") == 2048 and round_to(2049, "f16") == 2048 and round_to(2051, "f16") == 2052
    assert round_to(4098, "f16") == 4096  # a tie rounds to even


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_positions_are_exact_up_to_the_first_rounded_one(dtype: str) -> None:
    first = FIRST_ROUNDED[dtype]
    pos = np.arange(first + 64)
    wrong = np.nonzero(round_to(pos, dtype) != pos)[0]
    assert wrong[0] == first
    # the pair of inverse frequency 1 turns by the rounded position itself
    assert candle_angles([1.0], [first], dtype)[0, 0] == first - 1


@pytest.mark.parametrize(
    "dtype, last", [("f16", 2049), ("f16", 4200), ("f16", 40000), ("bf16", 300), ("bf16", 1100), ("bf16", 9000)]
)
def test_lints_closed_form_is_the_tables_worst_fastest_pair(dtype: str, last: int) -> None:
    first, worst = position_error(dtype, last)
    pos = np.arange(last + 1)
    brute = float(np.abs(candle_angles([1.0], pos, dtype)[:, 0] - pos).max())
    assert first == FIRST_ROUNDED[dtype] and worst == brute, (worst, brute)
    # negative control: one position short of the binade's worst gives less
    assert position_error(dtype, first - 1)[1] == 0.0


def test_table_error_against_f32() -> None:
    inv = [1.0 / 1e6 ** (i / 16) for i in range(0, 16, 2)]
    below = table_error(inv, 2049, "f16")  # positions 0..2048: all exact, angles rounded only
    past = table_error(inv, 2132, "f16")
    assert past["first_rounded_position"] == 2049
    assert 0.99 <= past["max_angle_error"] <= 1.01 and past["max_angle_error_position"] >= 2049
    assert below["max_angle_error"] < 0.6 * past["max_angle_error"]
    assert table_error(inv, 2132, "bf16")["max_angle_error"] > past["max_angle_error"]
    assert table_error(inv, 2132, "f32")["max_angle_error"] < 1e-3  # negative control: f32 is the reference's own table
