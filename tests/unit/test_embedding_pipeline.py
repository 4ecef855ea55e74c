"""The sentence-transformers pipeline as model facts (portkit.model.sentence_pipeline) and the
PK6xx rules on it: what is read, what is never opened, bad input as findings with a location,
JSON output, and lint staying free of torch on a pipeline directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fixtures.sentence_pipelines import write_pipeline
from portkit.cli import main
from portkit.model import load_model
from portkit.rules import GROUPS, RULES

ROOT = Path(__file__).resolve().parents[2]


def lint_json(d: Path, tmp_path: Path, *extra: str) -> tuple[int, list[dict]]:
    out = tmp_path / "o.json"
    rc = main(["lint", str(d), "--format", "json", "--output", str(out), *extra])
    doc = json.loads(out.read_text())
    findings = doc["findings"] if isinstance(doc, dict) else doc
    return rc, findings


def test_minilm_shape_is_read_as_sentence_transformers_reads_it(tmp_path: Path) -> None:
    p = load_model(write_pipeline(tmp_path / "m")).sentence_pipeline
    assert p is not None and p.problems == ()
    assert [m.kind for m in p.modules] == ["Transformer", "Pooling", "Normalize"]
    pool = p.modules[1]
    assert pool.pooling_mode == ("mean",) and pool.include_prompt  # from the legacy booleans
    assert not p.modules[2].folder_exists  # Normalize without a folder is no problem
    assert p.max_seq_length == 256 and p.do_lower_case is False
    assert p.summary() == "Transformer -> Pooling(mean) -> Normalize, max_seq_length 256"


def test_no_modules_json_no_pipeline(tmp_path: Path) -> None:
    d = write_pipeline(tmp_path / "m")
    (d / "modules.json").unlink()
    assert load_model(d).sentence_pipeline is None


def test_legacy_booleans_all_false_default_to_mean_and_new_keys_win(tmp_path: Path) -> None:
    p = load_model(
        write_pipeline(tmp_path / "a", pooling={"word_embedding_dimension": 8, "pooling_mode_cls_token": False})
    ).sentence_pipeline
    assert p.modules[1].pooling_mode == ("mean",)
    p = load_model(
        write_pipeline(
            tmp_path / "b", pooling={"embedding_dimension": 8, "pooling_mode": ["cls", "max"], "include_prompt": False}
        )
    ).sentence_pipeline
    assert p.modules[1].pooling_mode == ("cls", "max") and p.modules[1].include_prompt is False


def test_dense_from_config_and_safetensors_header(tmp_path: Path) -> None:
    mods = [("Transformer", ""), ("Pooling", "1_Pooling"), ("Dense", "2_Dense")]
    p = load_model(
        write_pipeline(tmp_path / "m", modules=mods, dense={"in_features": 32, "out_features": 8, "bias": False})
    ).sentence_pipeline
    dense = p.of_kind("Dense")[0]
    assert (dense.in_features, dense.out_features, dense.bias) == (32, 8, False)
    assert dense.activation == "torch.nn.modules.activation.Tanh"  # Dense's default when the key is absent
    assert dense.weights_file == "model.safetensors" and dense.weight_shape == (8, 32)


def test_dense_pickle_is_noted_never_opened(tmp_path: Path) -> None:
    mods = [("Transformer", ""), ("Pooling", "1_Pooling"), ("Dense", "2_Dense")]
    d = write_pipeline(tmp_path / "m", modules=mods, dense_weights="pytorch_model.bin")
    os.chmod(d / "2_Dense" / "pytorch_model.bin", 0)  # opening it would fail loudly
    rc, found = lint_json(d, tmp_path)
    (f,) = [f for f in found if f["code"] == "PK605"]
    assert "pytorch_model.bin only" in f["message"] and "32 -> 16" in f["message"]


def test_bad_json_is_a_finding_with_its_position(tmp_path: Path) -> None:
    d = write_pipeline(tmp_path / "m")
    (d / "1_Pooling" / "config.json").write_text('{\n  "pooling_mode": "mean",\n  oops\n}')
    rc, found = lint_json(d, tmp_path)
    (f,) = [f for f in found if f["code"] == "PK610"]
    assert f["filename"].endswith("1_Pooling/config.json") and f["location"] == {"row": 3, "column": 3}
    assert f["message"].startswith("invalid JSON")


def test_modules_json_not_a_list_and_escaping_path(tmp_path: Path) -> None:
    d = write_pipeline(tmp_path / "a", modules_text='{"0": {}}')
    rc, found = lint_json(d, tmp_path)
    assert [f["message"] for f in found if f["code"] == "PK610"] == [
        "modules.json must be a list of modules, not a JSON dict; sentence-transformers iterates it"
    ]
    d = write_pipeline(tmp_path / "b", modules=[("Transformer", ""), ("Pooling", "../elsewhere")])
    rc, found = lint_json(d, tmp_path)
    (f,) = [f for f in found if f["code"] == "PK610"]
    assert "leaves the model directory" in f["message"] and f["location"]["row"] > 1


def test_missing_pooling_folder_says_sentence_transformers_fails(tmp_path: Path) -> None:
    d = write_pipeline(tmp_path / "m", skip_folders=("1_Pooling",))
    rc, found = lint_json(d, tmp_path)
    (f,) = [f for f in found if f["code"] == "PK608"]
    assert "embedding_dimension" in f["message"] and "fails to load" in f["message"]
    assert f["filename"].endswith("modules.json") and f["location"]["row"] > 1
    assert not [f for f in found if f["code"] == "PK602"]  # no pooling facts from a missing config


def test_summary_and_max_seq_length_in_json_output(tmp_path: Path) -> None:
    d = write_pipeline(tmp_path / "m", truncation=128)
    rc, found = lint_json(d, tmp_path)
    by = {f["code"]: f for f in found if f["code"].startswith("PK6")}
    assert set(by) == {"PK601", "PK602", "PK603", "PK607", "PK611"}  # PK611: a BERT config, whatever its pipeline
    assert "Transformer -> Pooling(mean) -> Normalize, max_seq_length 256" in by["PK601"]["message"]
    assert by["PK602"]["severity"] == "info" and by["PK603"]["severity"] == "info"
    assert "max_seq_length 256" in by["PK607"]["message"] and "truncates to 128" in by["PK607"]["message"]
    assert by["PK607"]["transformers_value"] == 256 and by["PK607"]["candle_value"] == 128
    assert by["PK607"]["filename"].endswith("sentence_bert_config.json") and by["PK607"]["location"] == {
        "row": 1,
        "column": 2,
    }


def test_cls_pooling_and_include_prompt_false_are_warnings(tmp_path: Path) -> None:
    d = write_pipeline(
        tmp_path / "m", pooling={"embedding_dimension": 32, "pooling_mode": "mean", "include_prompt": False}
    )
    rc, found = lint_json(d, tmp_path)
    (f,) = [f for f in found if f["code"] == "PK602"]
    assert f["severity"] == "warning" and "include_prompt is false" in f["message"]


def test_select_the_group(tmp_path: Path) -> None:
    assert GROUPS["6"] == "embedding" and {c for c, r in RULES.items() if r.group == "embedding"} >= {
        f"PK6{i:02d}" for i in range(1, 11)
    }
    d = write_pipeline(tmp_path / "m")
    rc, found = lint_json(d, tmp_path, "--select", "PK6")
    assert found and all(f["code"].startswith("PK6") for f in found)


def test_lint_of_a_pipeline_imports_no_torch(tmp_path: Path) -> None:
    mods = [("Transformer", ""), ("Pooling", "1_Pooling"), ("Dense", "2_Dense"), ("Normalize", "3_Normalize")]
    d = write_pipeline(tmp_path / "m", modules=mods)
    prog = (
        "import sys\nfrom portkit.cli import main\n"
        f"rc = main(['lint', {str(d)!r}, '--format', 'json', '--output', {str(tmp_path / 'o.json')!r}])\n"
        "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', "
        "'sentence_transformers', 'safetensors', 'numpy')))\n"
    )
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.strip().endswith("[]"), r.stdout + r.stderr
    assert "PK605" in (tmp_path / "o.json").read_text()


def test_missing_dense_folder_names_both_arguments(tmp_path: Path) -> None:
    mods = [("Transformer", ""), ("Pooling", "1_Pooling"), ("Dense", "2_Dense")]
    d = write_pipeline(tmp_path / "m", modules=mods, skip_folders=("2_Dense",))
    rc, found = lint_json(d, tmp_path)
    (f,) = [f for f in found if f["code"] == "PK608"]
    assert "'in_features' and 'out_features'" in f["message"] and "2_Dense/config.json" in f["message"]
    assert not [f for f in found if f["code"] == "PK605"]
