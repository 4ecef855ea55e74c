"""portkit/candle_modules.py against candle's own sources, and what PK114 says with it.

The table is generated (`python -m fixtures.candle_modules --write`) from every release's
src/models/mod.rs. Here each release whose source is in cargo's registry is read again; the
release the wheel is built on always is (`make native` downloads it), so the check never runs
on nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.candle_modules import modules_of
from portkit.candle_modules import ADDED, MODULE_FOR
from portkit.candle_release import NATIVE, RELEASES, key
from portkit.cli import main


def test_the_table_is_each_releases_module_list() -> None:
    checked = []
    for release in RELEASES:
        mods = modules_of(release)
        if mods is None:
            continue
        expected = {m for m, since in ADDED.items() if key(since) <= key(release)}
        assert mods == expected, f"candle-transformers {release}: {sorted(mods ^ expected)}"
        checked.append(release)
    assert NATIVE in checked, f"candle-transformers {NATIVE}'s source is not in cargo's registry (run `make native`)"


def test_every_model_type_maps_to_a_module_candle_has() -> None:
    assert set(MODULE_FOR.values()) <= set(ADDED)
    assert (
        MODULE_FOR["gemma4_text"] == "gemma4"
        and MODULE_FOR["glm4"] == "glm4_new"
        and MODULE_FOR["gpt_bigcode"] == "bigcode"
    )


def _pk114(tmp_path: Path, capsys: pytest.CaptureFixture[str], model_type: str, release: str) -> str:
    d = tmp_path / model_type
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": model_type}))
    main(["lint", str(d), "--candle", release, "--format", "json", "--select", "PK114"])
    (finding,) = json.loads(capsys.readouterr().out)
    return finding["message"]


@pytest.mark.parametrize(
    ("model_type", "release", "says"),
    [
        ("gemma4_text", "0.10.2", "candle 0.10.2 has no `gemma4` module; it arrived in 0.11.0 (models/gemma4/ added)"),
        ("gemma4", "0.10.2", "candle 0.10.2 has no module for `model_type` `gemma4`; `gemma4` arrived in 0.11.0"),
        ("olmo", "0.11.0", "candle 0.11.0 has a `olmo` module for `model_type` `olmo`; portkit does not check"),
        ("whisper", "0.9.1", "candle 0.9.1 has a `whisper` module"),
        ("lfm2", "0.10.0", "`lfm2` arrived in 0.11.0"),  # 0.9.2 has only quantized_lfm2
        ("falcon_mamba", "0.11.1", "candle 0.11.1 has no module for `model_type` `falcon_mamba`"),
    ],
)
def test_pk114_says_what_the_release_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model_type: str, release: str, says: str
) -> None:
    assert says in _pk114(tmp_path, capsys, model_type, release)


def test_pk114_is_silent_on_gemma4_text_and_names_the_multimodal_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gemma4_text is a checked family from 0.11.0 (PK126-PK130 speak); Gemma4ForConditionalGeneration's
    `gemma4` gets the one path candle has and where it refuses, and without that architecture the plain words."""
    d = tmp_path / "text"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "gemma4_text"}))
    main(["lint", str(d), "--format", "json", "--select", "PK114"])
    assert json.loads(capsys.readouterr().out) == []
    d = tmp_path / "mm"
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps({"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"]})
    )
    main(["lint", str(d), "--format", "json", "--select", "PK114"])
    (finding,) = json.loads(capsys.readouterr().out)
    assert "only through `gemma4::Model`" in finding["message"]
    assert "model.language_model.model.embed_tokens.weight" in finding["message"]
    plain = _pk114(tmp_path, capsys, "gemma4", "0.11.0")  # no architectures: nothing says which path
    assert (
        plain == "candle 0.11.0 has a `gemma4` module for `model_type` `gemma4`; portkit does not check that module yet"
    )
