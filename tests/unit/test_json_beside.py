"""generation_config.json (and config.json) are read one way everywhere in verify: absent is {}, a file
lint cannot read is one line of bad input (the sampling section and where generate() stops, alike)."""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.verify.errors import BadInput
from portkit.verify.model_dir import json_beside


def test_absent_is_empty_and_an_object_is_read(tmp_path: Path) -> None:
    assert json_beside(tmp_path, "generation_config.json") == {}
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [1, 2]}')
    assert json_beside(tmp_path, "generation_config.json") == {"eos_token_id": [1, 2]}


def test_a_file_lint_cannot_read_is_bad_input_in_every_reader(tmp_path: Path) -> None:
    from portkit.verify.sections.sampling import _generate
    from portkit.verify.sections.tokens import generation_stop

    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [1, 2],')
    for read in (
        lambda: json_beside(tmp_path, "generation_config.json"),
        lambda: _generate(tmp_path),
        lambda: generation_stop(tmp_path),
    ):
        with pytest.raises(BadInput, match="generation_config.json"):
            read()
