"""Generated docs tables hold on another machine: verdicts and counts exact, measured numbers by
order of magnitude (fixtures/doc_tables.py)."""

import pytest

from fixtures.doc_tables import assert_current

S, E = "<!-- s -->", "<!-- e -->"


def _doc(row: str) -> str:
    return f"intro\n{S}\n{row}\n{E}\nafter"


def test_another_cpus_summation_order_is_the_same_table():
    assert_current(
        _doc("| chat | 2 steps | agrees (exit 0) | 1.10e-05 from transformers, 0.948 |"),
        f"{S}\n| chat | 2 steps | agrees (exit 0) | 9.89e-06 from transformers, 0.951 |\n{E}",
        S,
        E,
        "regenerate",
    )


@pytest.mark.parametrize(
    "now",
    [
        "| chat | 2 steps | MISMATCH (exit 1) | 1.10e-05 from transformers, 0.948 |",  # a verdict
        "| chat | 3 steps | agrees (exit 0) | 1.10e-05 from transformers, 0.948 |",  # a count
        "| chat | 2 steps | agrees (exit 0) | 2.00e-04 from transformers, 0.948 |",  # a number 18x off
        "| chat | 2 steps | agrees (exit 0) | 0 from transformers, 0.948 |",  # zero is not small
    ],
)
def test_a_verdict_a_count_or_an_order_of_magnitude_is_another_table(now):
    with pytest.raises(AssertionError):
        assert_current(
            _doc("| chat | 2 steps | agrees (exit 0) | 1.10e-05 from transformers, 0.948 |"),
            f"{S}\n{now}\n{E}",
            S,
            E,
            "regenerate",
        )
