"""`portkit fix`: the edits it makes, the place of every key, and what it refuses.

Each case states the config before and checks the file after, byte for byte where the
order of keys matters, so a fix that moves a key or accepts what it should refuse fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fixtures import skeleton as sk
from portkit import fix
from portkit.cli import main
from portkit.errors import InputError
from portkit.semantics import FamilyTransformersView, family_transformers_view

# PK103's documentation example: legacy `type` key, no `original_max_position_embeddings`
LEGACY_LLAMA3 = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_pk103_legacy_llama3_type_is_fixed_as_lint_promises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf4", rope_theta=500000.0, scaling=LEGACY_LLAMA3), weights=False)
    code, out, _ = cli(capsys, "lint", str(d))
    assert code == 1 and "PK103" in out and "1 fixable with `portkit fix --write`" in out
    before = json.loads((d / "config.json").read_text())
    code, _, err = cli(capsys, "fix", str(d), "--write")
    assert code == 0, err
    assert "PK103" in err
    after = json.loads((d / "config.json").read_text())
    assert after["rope_scaling"] == {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        # transformers fills it from max_position_embeddings; fix writes that value
        "original_max_position_embeddings": before["max_position_embeddings"],
        "rope_type": "llama3",
    }
    assert list(after) == list(before)
    assert cli(capsys, "lint", str(d))[0] == 0


def llama_tv(config: dict[str, object]) -> FamilyTransformersView:
    return family_transformers_view("llama", config)


def test_effective_values_ignore_only_the_legacy_type_key() -> None:
    base = sk.config("tf4", rope_theta=500000.0, scaling=LEGACY_LLAMA3)
    without_type = {k: v for k, v in LEGACY_LLAMA3.items() if k != "type"} | {"rope_type": "llama3"}
    same = fix.effective(llama_tv(sk.config("tf4", rope_theta=500000.0, scaling=without_type)))
    assert fix.effective(llama_tv(base)) == same
    # negative controls: a real rope value or the rope type still counts
    other_factor = sk.config("tf4", rope_theta=500000.0, scaling={**LEGACY_LLAMA3, "factor": 4.0})
    assert fix.effective(llama_tv(other_factor)) != same
    linear = sk.config("tf4", rope_theta=500000.0, scaling={"type": "linear", "factor": 8.0})
    assert fix.effective(llama_tv(linear))["rope_type"] == "linear"
    assert fix.effective(llama_tv(linear)) != same


# --------------------------------------------------------------------------- the place of every key


def keys_and_text(d: Path) -> tuple[list[str], str]:
    text = (d / "config.json").read_text()
    return list(json.loads(text)), text


def test_an_existing_key_is_edited_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A top-level `rope_theta` that conflicts with rope_parameters: edited where it stands."""
    cfg = sk.config("tf5", rope_theta=100000.0)
    cfg = {**cfg, "rope_theta": 10000.0}  # appended last by the dict, then moved to the middle below
    keys = list(cfg)
    keys.remove("rope_theta")
    keys.insert(keys.index("hidden_size"), "rope_theta")  # well before rope_parameters, not last
    d = sk.write_model(tmp_path / "m", {k: cfg[k] for k in keys}, weights=False)
    before_keys, before_text = keys_and_text(d)
    code, _, err = cli(capsys, "fix", str(d), "--write")
    assert code == 0, err
    after_keys, after_text = keys_and_text(d)
    assert after_keys == before_keys
    # exactly one line changed: the value, on the line where it was
    changed = [(a, b) for a, b in zip(before_text.splitlines(), after_text.splitlines(), strict=False) if a != b]
    assert changed == [('  "rope_theta": 10000.0,', '  "rope_theta": 100000.0,')]
    assert len(before_text.splitlines()) == len(after_text.splitlines())


def test_new_keys_go_right_after_rope_parameters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING), weights=False)
    before_keys, _ = keys_and_text(d)
    assert before_keys[-1] != "rope_parameters"  # so "after rope_parameters" differs from "at the end"
    assert cli(capsys, "fix", str(d), "--write")[0] == 0
    after_keys, _ = keys_and_text(d)
    at = before_keys.index("rope_parameters") + 1
    assert sorted(after_keys[at : at + 2]) == ["rope_scaling", "rope_theta"]
    assert after_keys[:at] + after_keys[at + 2 :] == before_keys


def test_new_keys_go_at_the_end_without_rope_parameters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf4", max_position_embeddings=sk.DROP), weights=False)
    before_keys, _ = keys_and_text(d)
    assert cli(capsys, "fix", str(d), "--write")[0] == 0
    after_keys, _ = keys_and_text(d)
    assert after_keys == before_keys + ["max_position_embeddings"]


def test_apply_edits_replaces_in_place_and_appends_in_edit_order() -> None:
    config = {"a": 1, "rope_parameters": {}, "b": 2}
    assert list(fix.apply_edits(config, {"b": 3, "new1": 4, "new2": 5}).items()) == [
        ("a", 1),
        ("rope_parameters", {}),
        ("new1", 4),
        ("new2", 5),
        ("b", 3),
    ]
    assert list(fix.apply_edits({"a": 1, "b": 2}, {"new": 0, "a": 9}).items()) == [("a", 9), ("b", 2), ("new", 0)]
    assert fix.apply_edits(config, {}) == config


@pytest.mark.parametrize(
    "indent,newline",
    [(2, True), (4, True), ("\t", True), (2, False), (None, True)],
)
def test_the_file_keeps_its_indentation_and_final_newline(
    indent: int | str | None, newline: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "m"
    d.mkdir()
    cfg = {**sk.config("tf5", rope_theta=100000.0), "rope_theta": 10000.0}
    text = json.dumps(cfg, indent=indent) + ("\n" if newline else "")
    (d / "config.json").write_text(text)
    assert cli(capsys, "fix", str(d), "--write")[0] == 0
    after = (d / "config.json").read_text()
    assert after.endswith("\n") == newline
    # a compact file is written with transformers' 2 spaces
    assert after == json.dumps({**cfg, "rope_theta": 100000.0}, indent=indent or 2) + ("\n" if newline else "")


def test_write_replaces_a_symlinked_config_and_keeps_its_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blob = tmp_path / "blobs" / "abc"
    blob.parent.mkdir()
    blob.write_text(json.dumps({**sk.config("tf5"), "rope_theta": 10000.0}, indent=2))
    blob.chmod(0o640)
    d = tmp_path / "snap"
    d.mkdir()
    (d / "config.json").symlink_to(blob)
    blob_text = blob.read_text()
    assert cli(capsys, "fix", str(d), "--write")[0] == 0
    assert blob.read_text() == blob_text  # the shared blob is never written through the link
    assert not (d / "config.json").is_symlink()
    assert json.loads((d / "config.json").read_text())["rope_theta"] == 100000.0
    assert (d / "config.json").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in d.iterdir()) == ["config.json"]  # no temporary file left


def test_diff_is_empty_and_nothing_written_when_nothing_to_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf4"), weights=False)
    p = fix.plan(d)
    assert not p.changed and p.diff() == "" and p.new_text is None and not p.fixed and not p.refused
    code, out, err = cli(capsys, "fix", str(d), "--write")
    assert (code, out, err) == (0, "", "portkit: nothing to fix\n")


def test_diff_outside_the_working_directory_names_the_path_without_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = sk.write_model(tmp_path / "m", {**sk.config("tf5"), "rope_theta": 10000.0}, weights=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    name = (d / "config.json").as_posix().lstrip("/")
    assert fix.plan(d).diff().startswith(f"--- a/{name}\n+++ b/{name}\n")


# --------------------------------------------------------------------------- refusals


def remaining(capsys: pytest.CaptureFixture[str], d: Path) -> tuple[str, str]:
    """`fix --write` on a model where findings remain: exit 1, each remaining one on stderr with
    its reason; returns (the config as written, stderr)."""
    code, out, err = cli(capsys, "fix", str(d), "--write")
    assert code == 1 and out == "" and "no config edit fixes" in err and "  reason: " in err, (code, err)
    return (d / "config.json").read_text(), err


def refused(capsys: pytest.CaptureFixture[str], d: Path) -> str:
    before = (d / "config.json").read_bytes()
    code, out, err = cli(capsys, "fix", str(d), "--write")
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("portkit: error: "), err
    assert (d / "config.json").read_bytes() == before  # a refusal writes nothing
    return err


def test_refuses_a_key_written_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "m"
    d.mkdir()
    text = json.dumps(sk.config("tf5"), indent=2)
    (d / "config.json").write_text(text[:-2] + ',\n  "rope_theta": 1.0,\n  "rope_theta": 2.0\n}\n')
    assert "key `rope_theta` is written twice; fix it by hand first" in refused(capsys, d)


def test_refuses_a_config_transformers_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = sk.write_model(tmp_path / "m", {**sk.config("tf5"), "hidden_size": "64"}, weights=False)
    assert "transformers refuses this config" in refused(capsys, d)


def test_fixes_what_it_can_next_to_an_unfixable_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Like ruff: PK101 is fixed, PK105 (a bias, no edit fixes it) remains with its reason, exit 1."""
    d = sk.write_model(tmp_path / "m", sk.config("tf5", attention_bias=True), weights=False)
    p = fix.plan(d)
    assert [f.code for f in p.refused] == ["PK105"] and [f.code for f in p.fixed] == ["PK101"] and p.changed
    assert [e.safe for e in p.edits] == [True, False] and p.edits[1].refused == p.refused[0].help
    text, err = remaining(capsys, d)
    assert json.loads(text)["rope_theta"] == 100000.0 and text == p.new_text
    assert "fixed 1 finding (PK101)" in err and "1 finding remains" in err
    assert "PK105 attention-bias-ignored: " in err and f"  reason: {p.refused[0].help}" in err
    code, out, _ = cli(capsys, "lint", str(d))
    assert code == 1 and "PK105" in out and "PK101" not in out


def test_linear_scaling_which_candle_has_no_equivalent_for_remains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf4", scaling={"type": "linear", "factor": 2.0}), weights=False)
    before = (d / "config.json").read_text()
    text, err = remaining(capsys, d)
    assert text == before and "PK103" in err and "nothing to fix" not in err


def test_fixes_what_hides_behind_the_first_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """candle's serde stops at its first error (PK103's `rope_scaling`), but lint names every
    missing key at once (PK110, for every family); fix fixes both in one plan."""
    d = sk.write_model(
        tmp_path / "m",
        sk.config("tf4", rope_theta=500000.0, scaling=LEGACY_LLAMA3, rms_norm_eps=sk.DROP),
        weights=False,
    )
    code, out, _ = cli(capsys, "lint", str(d))
    assert code == 1 and "PK103" in out and "PK110" in out and "2 fixable with `portkit fix --write`" in out, out
    p = fix.plan(d)
    assert [f.code for f in p.fixed] == ["PK103", "PK110"] and p.refused == []
    code, _, err = cli(capsys, "fix", str(d), "--write")
    assert code == 0, err
    after = json.loads((d / "config.json").read_text())
    assert after["rope_scaling"]["rope_type"] == "llama3" and after["rms_norm_eps"] == 1e-06  # transformers' default
    assert cli(capsys, "lint", str(d))[0] == 0


def test_the_safety_check_refuses_an_edit_that_changes_transformers(tmp_path: Path) -> None:
    from portkit.errors import InputError
    from portkit.model import load_model

    d = sk.write_model(tmp_path / "m", {**sk.config("tf5"), "rope_theta": 10000.0}, weights=False)
    facts = load_model(d)
    assert facts.config is not None and isinstance(facts.config.value, dict)
    good = {**facts.config.value, "rope_theta": 100000.0}
    fix._check(facts, facts.config, good, fix.render(good, facts.config.text))  # passes
    bad = {
        **good,
        "hidden_size": 128,
        "rope_parameters": {**good["rope_parameters"], "rope_theta": 5.0},
        "rope_theta": 5.0,
    }
    with pytest.raises(
        InputError, match=r"would change transformers' effective hidden_size, rope_parameters, rope_theta$"
    ):
        fix._check(facts, facts.config, bad, fix.render(bad, facts.config.text))
    # a legacy `type` is the one rope key that may go: transformers reads it only as rope_type's default
    typed = {**good, "rope_parameters": {**good["rope_parameters"], "type": "default"}}
    fix._check(facts, facts.config, typed, fix.render(typed, facts.config.text))
    still = dict(facts.config.value)  # the edit not made: PK101 still fires
    with pytest.raises(InputError, match="refusing to fix: PK101 would still fire after the edit"):
        fix._check(facts, facts.config, still, fix.render(still, facts.config.text))


def test_no_config_json_is_bad_input(tmp_path: Path) -> None:
    from portkit.errors import InputError
    from portkit.model import ModelFacts

    with pytest.raises(InputError, match="no config.json to fix"):
        fix.plan(tmp_path, ModelFacts(root=tmp_path, config=None))


# --------------------------------------------------------------------------- mutmut's survivors


def test_the_diff_is_a_whole_unified_diff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = {**sk.config("tf5"), "rope_theta": 10000.0}
    d = sk.write_model(tmp_path / "m", cfg, weights=False)
    monkeypatch.chdir(tmp_path)
    diff = fix.plan(Path("m")).diff()
    # one changed line, as whole lines: header, hunk, context, - and +, each ending in a newline
    assert diff.startswith("--- a/m/config.json\n+++ b/m/config.json\n@@ -")
    assert '\n-  "rope_theta": 10000.0\n+  "rope_theta": 100000.0\n' in diff
    lines = diff.splitlines(keepends=True)
    assert all(line.endswith("\n") for line in lines)
    assert [line[0] for line in lines[3:]].count("-") == 1 and [line[0] for line in lines[3:]].count("+") == 1
    assert d.is_dir()


def test_non_ascii_text_is_kept_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = sk.write_model(
        tmp_path / "m", {**sk.config("tf5"), "rope_theta": 10000.0, "name_or_path": "modèle-日本"}, weights=False
    )
    assert cli(capsys, "fix", str(d), "--write")[0] == 0
    text = (d / "config.json").read_text(encoding="utf-8")
    assert '"name_or_path": "modèle-日本"' in text and "\\u" not in text


def test_refusals_name_the_config_path(tmp_path: Path) -> None:
    from portkit.errors import InputError
    from portkit.model import ModelFacts, load_model

    with pytest.raises(InputError) as e:
        fix.plan(tmp_path, ModelFacts(root=tmp_path, config=None))
    assert str(e.value) == f"{tmp_path}: no config.json to fix"
    d = tmp_path / "m"
    d.mkdir()
    text = json.dumps(sk.config("tf5"), indent=2)
    (d / "config.json").write_text(text.replace('"rope_theta": 100000.0', '"rope_theta": 1.0, "rope_theta": 2.0', 1))
    with pytest.raises(InputError) as e:
        fix.plan(d)
    assert str(e.value) == (
        f"{d / 'config.json'}: key `rope_parameters.rope_theta` is written twice; fix it by hand first "
        "(transformers keeps the last, candle refuses)"
    )
    d2 = sk.write_model(
        tmp_path / "m2", sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING), weights=False
    )
    facts = load_model(d2)
    assert facts.config is not None
    unchanged = dict(facts.config.value)  # the edit not made: both rope findings still fire
    with pytest.raises(InputError) as e:
        fix._check(facts, facts.config, unchanged, fix.render(unchanged, facts.config.text))
    assert str(e.value) == f"{d2 / 'config.json'}: refusing to fix: PK101, PK102 would still fire after the edit"
    changed = {**unchanged, "vocab_size": 512}
    with pytest.raises(InputError) as e:
        fix._check(facts, facts.config, changed, fix.render(changed, facts.config.text))
    assert (
        str(e.value)
        == f"{d2 / 'config.json'}: refusing to fix: the edit would change transformers' effective vocab_size"
    )


def test_generation_config_is_read_on_both_sides_of_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """generate() stops on generation_config.json's EOS: fixing rope_theta must not look like an EOS change."""
    d = sk.write_model(
        tmp_path / "m",
        {**sk.config("tf5"), "rope_theta": 10000.0},
        weights=False,
        generation_config={"eos_token_id": [2, 7]},
    )
    text, err = remaining(capsys, d)  # generation_config.json's EOS ids: no config edit (PK111)
    assert json.loads(text)["rope_theta"] == 100000.0 and "PK111" in err and "PK101" in err


def test_write_replaces_from_a_temporary_file_beside_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.replace is atomic only within one filesystem: the temporary file is in the config's directory."""
    d = sk.write_model(tmp_path / "m", {**sk.config("tf5"), "rope_theta": 10000.0}, weights=False)
    p = fix.plan(d)
    seen: list[tuple[Path, Path]] = []
    real = os.replace

    def spy(src: str, dst: str) -> None:
        seen.append((Path(src), Path(dst)))
        real(src, dst)

    monkeypatch.setattr(fix.os, "replace", spy)
    fix.write(p)
    ((src, dst),) = seen
    assert src.parent == dst.parent == d and dst.name == "config.json" and src.name.startswith(".config.json.")
    assert (d / "config.json").read_bytes() == p.new_text.encode("utf-8")  # type: ignore[union-attr]


def test_a_failed_write_leaves_the_config_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = sk.write_model(tmp_path / "m", {**sk.config("tf5"), "rope_theta": 10000.0}, weights=False)
    before = (d / "config.json").read_bytes()
    p = fix.plan(d)

    def fail(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(fix.os, "replace", fail)
    with pytest.raises(InputError, match="cannot write the fixed config: disk full"):  # one line, exit 2
        fix.write(p)
    assert sorted(x.name for x in d.iterdir()) == ["config.json"] and (d / "config.json").read_bytes() == before


def test_family_configs_are_checked_with_their_own_transformers_view(tmp_path: Path) -> None:
    import dataclasses

    from portkit.model import load_model
    from tests.unit.family_configs import T5

    cfg = T5["gemma3"]
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    facts = load_model(d)
    got = fix._effective(facts, cfg, None)
    view = family_transformers_view("gemma3", cfg)
    want = {
        **view.values,
        **{
            k: v for k, v in dataclasses.asdict(view).items() if k not in ("family", "values", "sources", "rope_source")
        },
    }
    assert got == want and got["local_rope_parameters"]["rope_theta"] == 50000.0
    legacy_type = {**cfg, "rope_parameters": {k: {**v, "type": "default"} for k, v in cfg["rope_parameters"].items()}}
    typed = fix._effective(facts, legacy_type, None)
    assert "type" not in typed["rope_parameters"] and "type" not in typed["local_rope_parameters"]
    assert typed == got
    # llama is checked like every family, with its own view
    llama = sk.config("tf5")
    assert fix._effective(facts, llama, None)["rope_theta"] == family_transformers_view("llama", llama).get(
        "rope_theta"
    )
    assert fix._effective(facts, llama, None)["hidden_size"] == llama["hidden_size"]


def test_a_family_config_missing_a_required_key_is_fixed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.unit.family_configs import T5

    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(T5["mistral"], indent=2))
    before = json.loads((d / "config.json").read_text())
    code, _, err = cli(capsys, "fix", str(d), "--write")
    assert code == 0 and "PK110" in err, err
    after = json.loads((d / "config.json").read_text())
    added = [k for k in after if k not in before]
    assert added and [k for k in after if k in before] == list(before)
    assert cli(capsys, "fix", str(d))[0] == 0


def test_weight_findings_do_not_stop_a_config_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """fix looks only at the config rules: a missing layer tensor is for the weights, not a reason to refuse."""
    cfg = {**sk.config("tf5"), "rope_theta": 10000.0}
    d = sk.write_model(tmp_path / "m", cfg, drop=["model.layers.1.mlp.up_proj.weight"])
    code, out, _ = cli(capsys, "lint", str(d))
    assert code == 1 and "PK201" in out and "PK101" in out
    code, _, err = cli(capsys, "fix", str(d), "--write")
    assert code == 0 and "PK101" in err, err
    assert json.loads((d / "config.json").read_text())["rope_theta"] == 100000.0


def test_a_family_error_no_edit_fixes_remains_next_to_the_fixed_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gemma2 re-saved by transformers 5 with a conflicting top-level `rope_theta` (PK101, fixable)
    and `query_pre_attn_scalar` != `head_dim` (PK118, no edit): the rope_theta is written and
    PK118 (with the window warning PK115) remains."""
    from tests.unit.family_configs import T5

    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps({**T5["gemma2"], "rope_theta": 12345.0, "query_pre_attn_scalar": 24}, indent=2)
    )
    p = fix.plan(d)
    assert [f.code for f in p.fixed] == ["PK101"] and [f.code for f in p.refused] == ["PK115", "PK118"] and p.changed
    text, err = remaining(capsys, d)
    assert json.loads(text)["rope_theta"] == 100000.0 and "2 findings remain" in err and "PK118" in err


def test_write_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """Under the C locale (a bare container: ASCII as Python's default text encoding) the
    non-ASCII text of a config is still written, as UTF-8."""
    import subprocess
    import sys

    cfg = {**sk.config("tf5"), "rope_theta": 10000.0, "name_or_path": "modèle-日本"}
    here = sk.write_model(tmp_path / "here", cfg, weights=False)
    fix.write(fix.plan(here))  # this process: UTF-8 mode or a UTF-8 locale
    d = sk.write_model(tmp_path / "m", cfg, weights=False)
    env = {
        **os.environ,
        "LC_ALL": "C",
        "LANG": "C",
        "PYTHONUTF8": "0",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONIOENCODING": "utf-8",
    }
    prog = (
        "import locale, sys\nfrom portkit import fix\n"
        "assert locale.getpreferredencoding(False).lower() in ('ascii', 'ansi_x3.4-1968'), "
        f"locale.getpreferredencoding(False)\nfix.write(fix.plan(__import__('pathlib').Path({str(d)!r})))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", prog], capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[2]
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert (d / "config.json").read_bytes() == (here / "config.json").read_bytes()
    written = json.loads((d / "config.json").read_bytes().decode("utf-8"))
    assert written["name_or_path"] == "modèle-日本" and written["rope_theta"] == 100000.0


def test_the_check_relints_under_the_target_a_warning_left_standing_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gemma2's PK115 window warning survives the PK101 edit, and judging it reads the target's
    `--max-tokens`: fix's check re-lints the edited config under a real Target."""
    from tests.unit.family_configs import T5

    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**T5["gemma2"], "rope_theta": 12345.0}, indent=2))
    code, out, _ = cli(capsys, "lint", str(d))
    assert "PK101" in out and "PK115" in out
    text, err = remaining(capsys, d)
    assert "fixed 1 finding (PK101)" in err and "PK115" in err, err
    assert json.loads(text)["rope_theta"] == 100000.0
    code, out, _ = cli(capsys, "lint", str(d))
    assert "PK101" not in out and "PK115" in out


def test_an_unfixable_finding_does_not_stop_the_relint(tmp_path: Path) -> None:
    """PK105 (a bias, no edit fixes it) next to PK103 and PK110 (lint names both): fix writes
    both edits, and PK105 remains."""
    d = sk.write_model(
        tmp_path / "m",
        sk.config("tf4", rope_theta=500000.0, scaling=LEGACY_LLAMA3, rms_norm_eps=sk.DROP, attention_bias=True),
        weights=False,
    )
    p = fix.plan(d)
    assert [f.code for f in p.refused] == ["PK105"] and [f.code for f in p.fixed] == ["PK103", "PK110"] and p.changed


def test_a_fix_that_does_not_silence_its_rule_is_refused_not_repeated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fix lints its edit again only while something new fires: a rule whose edit changes
    nothing keeps firing, is not new the second time, and the check then refuses it (no real
    rule does this today; the loop must still end)."""
    from typing import Any

    from portkit.errors import InputError
    from portkit.rules import RULES
    from portkit.rules.base import Rule

    class Stubborn(Rule):
        """Always fires, with an edit that changes nothing."""

        code = "PK199"
        name = "stubborn"
        group = "config"
        fix_availability = "always"
        fix_title = "Write `use_cache`"

        def check(self, ctx: Any) -> Any:
            yield self.finding(ctx, "still here", fix_edits={"use_cache": True})

    monkeypatch.setitem(RULES, "PK199", Stubborn())
    cfg = {**sk.config("tf5"), "use_cache": True}
    d = sk.write_model(tmp_path / "m", cfg, weights=False)
    with pytest.raises(InputError) as e:
        fix.plan(d)
    assert str(e.value) == f"{d / 'config.json'}: refusing to fix: PK199 would still fire after the edit"
