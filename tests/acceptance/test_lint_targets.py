"""What a path argument means to `portkit lint`: one file is one model.

A directory: everything in it. A `.gguf`: that GGUF alone, with the config.json beside it as
context for the cross-checks. config.json, safetensors, shards, the index: the Hugging Face
model of their directory, once however many of its files are passed. And the messages that go
with it: singular/plural, and no llama3 advice for a scaling candle cannot express.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fixtures import skeleton as sk
from portkit.cli import main
from portkit.lint import lint_paths


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def found(capsys: pytest.CaptureFixture[str], *paths: str | Path) -> tuple[int, list[tuple[str, str, str]]]:
    """(exit code, [(code, file name, message)]) of `portkit lint --format json PATHS`."""
    code, out, _ = cli(capsys, "lint", "--format", "json", "--no-config", *map(str, paths))
    return code, [(f["code"], Path(f["filename"]).name, f["message"]) for f in json.loads(out)]


@pytest.fixture()
def quants(tmp_path: Path) -> Path:
    """One repository, many quantizations of one model, as GGUF repos on the Hub hold them:
    a clean f32, a q8_0 whose freq_base disagrees with config.json (PK409, a cross-check),
    and a q4_0 without `llama.block_count` (PK401), beside a clean HF checkpoint."""
    cfg = sk.config("tf4")
    d = sk.write_model(tmp_path / "tiny-llama-GGUF", cfg)
    sk.write_gguf(d / "tiny-llama-f32.gguf", sk.llama_metadata(cfg), sk.gguf_tensors(cfg))
    sk.write_gguf(d / "tiny-llama-q8_0.gguf", sk.llama_metadata(cfg, freq_base=1234.0), sk.gguf_tensors(cfg))
    sk.write_gguf(d / "tiny-llama-q4_0.gguf", sk.llama_metadata(cfg, drop=["llama.block_count"]), sk.gguf_tensors(cfg))
    return d


def test_one_gguf_of_a_many_quantization_directory_is_that_gguf(
    quants: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert found(capsys, quants / "tiny-llama-f32.gguf") == (0, [])
    code, q8 = found(capsys, quants / "tiny-llama-q8_0.gguf")
    assert code == 1 and [(c, f) for c, f, _ in q8] == [("PK409", "tiny-llama-q8_0.gguf")]
    code, q4 = found(capsys, quants / "tiny-llama-q4_0.gguf")
    assert code == 1 and {f for _, f, _ in q4} == {"tiny-llama-q4_0.gguf"} and "PK401" in {c for c, _, _ in q4}
    # the directory keeps today's meaning: everything, and exactly the union of the files
    code, everything = found(capsys, quants)
    assert code == 1 and sorted(everything) == sorted(q8 + q4)
    code, two = found(capsys, quants / "tiny-llama-q8_0.gguf", quants / "tiny-llama-f32.gguf")
    assert sorted(two) == sorted(q8)


def test_the_config_beside_a_gguf_is_context_for_its_cross_checks(
    quants: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(quants / "tiny-llama-q8_0.gguf", alone)
    # PK409 compares the GGUF with config.json: without one beside it there is nothing to compare
    assert found(capsys, alone / "tiny-llama-q8_0.gguf") == (0, [])
    assert found(capsys, quants / "tiny-llama-q8_0.gguf")[1][0][0] == "PK409"


def test_a_config_finding_is_not_blamed_on_a_gguf(quants: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sk.write_json(quants / "config.json", sk.config("tf5"))  # PK101 in config.json
    code, cfg_findings = found(capsys, quants / "config.json")
    assert code == 1 and {f for _, f, _ in cfg_findings} == {"config.json"}  # no GGUF linted
    assert "PK101" in {c for c, _, _ in cfg_findings}
    code, f32 = found(capsys, quants / "tiny-llama-f32.gguf")
    assert code == 0 and f32 == []


def test_an_unusable_config_beside_a_gguf_is_left_out_with_a_note(
    quants: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (quants / "config.json").write_text('{"model_type": "llama",')
    code, out, err = cli(capsys, "lint", str(quants / "tiny-llama-q4_0.gguf"))
    assert code == 1 and "PK401" in out
    assert "config.json not used as context for the GGUF" in err and "error" not in err
    # asked for as the model itself, the broken config is still bad input
    assert cli(capsys, "lint", str(quants / "config.json"))[0] == 2
    assert cli(capsys, "lint", str(quants))[0] == 2


def test_several_files_of_one_model_lint_it_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = sk.write_model(
        tmp_path / "m",
        sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING),
        shards=2,
        generation_config={"eos_token_id": [2, 7]},
    )
    files = [
        d / "config.json",
        d / "model-00001-of-00002.safetensors",
        d / "model-00002-of-00002.safetensors",
        d / "model.safetensors.index.json",
        d / "generation_config.json",
        d / "config.json",
    ]
    code, by_files = found(capsys, *files)
    code_dir, by_dir = found(capsys, d)
    assert code == code_dir == 1
    assert sorted(by_files) == sorted(by_dir) and len(by_files) == len(set(by_files)) >= 3
    report = lint_paths([str(f) for f in files])
    assert report.models == [str(d)]


def test_a_directory_and_files_in_it_are_still_everything_once(
    quants: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    everything = found(capsys, quants)
    assert found(capsys, quants / "tiny-llama-q8_0.gguf", quants, quants / "config.json") == everything
    report = lint_paths([str(quants / "tiny-llama-q8_0.gguf"), str(quants / "config.json")])
    assert report.models == [str(quants), str(quants / "tiny-llama-q8_0.gguf")]


@pytest.mark.parametrize(
    "cfg,code",
    [
        (sk.config("tf5", scaling={"rope_type": "dynamic", "factor": 2.0}), "PK102"),
        (sk.config("tf5", scaling={"rope_type": "linear", "factor": 2.0}), "PK102"),
        (
            sk.config("tf5", scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
            "PK102",
        ),
        (sk.config("tf4", rope_scaling={"type": "linear", "factor": 2.0}), "PK103"),
        (sk.config("tf4", rope_scaling={"type": "dynamic", "factor": 2.0}), "PK103"),
    ],
)
def test_no_llama3_advice_for_a_scaling_candle_cannot_express(cfg: dict, code: str, tmp_path: Path) -> None:
    d = sk.write_model(tmp_path / "m", cfg, weights=False)
    (f,) = [f for f in lint_paths([str(d)]).findings if f.code == code]
    assert f.fix is None
    assert "llama3 scaling" not in (f.help or "") and "llama3 shape" not in (f.help or "")
    assert (
        f.help
        and "No config edit" in f.help
        and f"`{cfg.get('rope_parameters', cfg.get('rope_scaling'))['rope_type' if code == 'PK102' else 'type']}`"
        in f.help
    )


def test_llama3_scaling_keeps_its_fix_advice(tmp_path: Path) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING), weights=False)
    (f,) = [f for f in lint_paths([str(d)]).findings if f.code == "PK102"]
    assert f.fix is not None and f.help == "Write llama3 scaling as a top-level `rope_scaling` in candle's shape"


def test_counts_are_singular_and_plural(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = sk.write_model(tmp_path / "one", sk.config("tf5"))  # PK101 only
    code, out, _ = cli(capsys, "lint", str(one))
    assert code == 1 and out.rstrip().endswith("Found 1 finding (1 fixable with `portkit fix --write`).")
    code, _, err = cli(capsys, "lint", str(one), "--write-baseline", str(tmp_path / "b.json"))
    assert code == 0 and "wrote 1 finding to" in err and "(s)" not in err
    code, _, err = cli(capsys, "fix", "--write", str(one))
    assert code == 0 and "fixed 1 finding (PK101)" in err and "(s)" not in err
    two = sk.write_model(tmp_path / "two", sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING))
    code, _, err = cli(capsys, "fix", "--write", str(two))
    assert code == 0 and "fixed 2 findings (PK101, PK102)" in err
    lfs = sk.write_model(tmp_path / "lfs", sk.config("tf4"), weights=False)
    (lfs / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n")
    code, _, err = cli(capsys, "lint", str(lfs))
    assert "1 Git LFS pointer file skipped" in err and "(s)" not in err
