"""`portkit` end to end, in process (fast) and, where it matters, as a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from fixtures import skeleton as sk
from portkit import candle_release
from portkit.cli import main
from portkit.model import load_model
from portkit.semantics import family_transformers_view

SNAP = Path(__file__).parent / "snapshots"
ROOT = Path(__file__).resolve().parents[2]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def tf5_model(tmp_path: Path, name: str = "m") -> Path:
    """A Llama 3.1-style checkpoint as transformers 5 `save_pretrained` writes it."""
    return sk.write_model(tmp_path / name, sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING))


def snapshot(name: str, text: str, tmp: Path) -> None:
    text = text.replace(str(tmp.resolve()), "<TMP>").replace(str(tmp), "<TMP>")
    p = SNAP / name
    if os.environ.get("PORTKIT_UPDATE_SNAPSHOTS") or not p.exists():
        p.parent.mkdir(exist_ok=True)
        p.write_text(text)
    assert text == p.read_text(), f"snapshot {name} changed (PORTKIT_UPDATE_SNAPSHOTS=1 to accept)"


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_format_snapshots(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tf5_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "lint", "m", "--format", fmt, "--no-config")
    assert code == 1 and err == ""
    snapshot(f"lint.{fmt}", out, tmp_path)


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = sk.write_model(tmp_path / "good", sk.config("tf4"))
    bad = tf5_model(tmp_path)
    assert cli(capsys, "lint", str(good))[0] == 0
    assert cli(capsys, "lint", str(bad))[0] == 1
    assert cli(capsys, "lint", str(bad), "--exit-zero")[0] == 0
    code, _, err = cli(capsys, "lint", str(tmp_path / "nope"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("portkit: error: ")
    code, _, err = cli(capsys, "lint", str(good), "--select", "PK9")
    assert code == 2 and "unknown rule selector" in err
    assert cli(capsys, "lint", str(good), "--select", "PK1", "--ignore", "PK101")[0] == 0


def test_clean_text_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = sk.write_model(tmp_path / "good", sk.config("tf4"))
    code, out, _ = cli(capsys, "lint", str(good))
    assert code == 0 and out.splitlines() == [
        f"candle {candle_release.DEFAULT}, the default (no Cargo.lock in this directory or above)",
        "All checks passed!",
    ]


def test_select_ignore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tf5_model(tmp_path)
    _, out, _ = cli(capsys, "lint", str(bad), "--format", "json", "--select", "PK101")
    assert {f["code"] for f in json.loads(out)} == {"PK101"}
    _, out, _ = cli(capsys, "lint", str(bad), "--format", "json", "--ignore", "PK101,PK102")
    assert json.loads(out) == []


def test_pyproject_table_found_upward(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tf5_model(tmp_path / "repo" / "models")
    (tmp_path / "repo" / "pyproject.toml").write_text(
        '[tool.portkit]\nignore = ["PK102"]\ndtype = "bf16"\ncandle = "0.11.0"\n'
    )
    _, out, _ = cli(capsys, "lint", str(bad), "--format", "json")
    assert {f["code"] for f in json.loads(out)} == {"PK101", "PK301"}
    _, out, _ = cli(capsys, "lint", str(bad), "--format", "json", "--dtype", "f32")  # the command line wins
    assert {f["code"] for f in json.loads(out)} == {"PK101"}
    _, out, _ = cli(capsys, "lint", str(bad), "--format", "json", "--no-config")
    assert {f["code"] for f in json.loads(out)} == {"PK101", "PK102"}
    (tmp_path / "repo" / "pyproject.toml").write_text("[tool.portkit]\nbogus = 1\n")
    code, _, err = cli(capsys, "lint", str(bad))
    assert code == 2 and "unknown [tool.portkit] key" in err


def test_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tf5_model(tmp_path)
    code, out, _ = cli(capsys, "lint", str(bad), "--format", "json", "--output", str(tmp_path / "r.json"))
    assert code == 1 and out == ""
    assert len(json.loads((tmp_path / "r.json").read_text())) == 2


def test_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tf5_model(tmp_path)
    base = tmp_path / "baseline.json"
    assert cli(capsys, "lint", str(bad), "--write-baseline", str(base))[0] == 0
    assert cli(capsys, "lint", str(bad), "--baseline", str(base))[0] == 0
    # a new problem is reported, the recorded ones are not
    cfg = json.loads((bad / "config.json").read_text())
    cfg["attention_bias"] = True
    (bad / "config.json").write_text(json.dumps(cfg, indent=2))
    code, out, _ = cli(capsys, "lint", str(bad), "--baseline", str(base), "--format", "json")
    assert code == 1 and [f["code"] for f in json.loads(out)] == ["PK105"]
    base.write_text("[]")
    assert cli(capsys, "lint", str(bad), "--baseline", str(base))[0] == 2


def test_file_paths_lint_each_dir_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tf5_model(tmp_path)
    _, out, _ = cli(
        capsys, "lint", str(bad / "config.json"), str(bad / "model.safetensors"), str(bad), "--format", "json"
    )
    assert len(json.loads(out)) == 2


def test_rules_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "rules")
    assert code == 0 and re.search(r"^PK101  \[\*\]  rope-theta-in-rope-parameters ", out, re.M) and "preview" in out
    code, out, _ = cli(capsys, "rules", "--format", "json", "--all")
    from portkit.rules import CODES

    assert len(json.loads(out)) == len(CODES)
    code, out, _ = cli(capsys, "explain", "PK101")
    assert code == 0 and out.startswith("# PK101 rope-theta-in-rope-parameters") and "## Candle source" in out
    assert cli(capsys, "explain", "rope-theta-in-rope-parameters")[1] == out
    assert cli(capsys, "explain", "PK999")[0] == 2


def test_schema_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "schema", "candle-llama-config")
    assert code == 0 and json.loads(out)["required"][0] == "hidden_size"


def test_fix_diff_then_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tf5_model(tmp_path)
    before_text = (bad / "config.json").read_text()
    before = family_transformers_view("llama", json.loads(before_text))
    code, out, _ = cli(capsys, "fix", str(bad))
    assert code == 1 and out.startswith("--- a/") and '+  "rope_theta": 500000.0,' in out
    assert (bad / "config.json").read_text() == before_text  # --diff never writes
    code, _, err = cli(capsys, "fix", str(bad), "--write")
    assert code == 0 and "fixed 2 findings (PK101, PK102)" in err
    after_text = (bad / "config.json").read_text()
    after = family_transformers_view("llama", json.loads(after_text))
    skip = {"sources", "rope_source"}  # where transformers read each value, not what it computes
    assert {k: v for k, v in asdict(after).items() if k not in skip} == {
        k: v for k, v in asdict(before).items() if k not in skip
    }
    assert list(json.loads(after_text))[: len(json.loads(before_text))] != []
    old_keys = list(json.loads(before_text))
    new_keys = [k for k in json.loads(after_text) if k in old_keys]
    assert new_keys == old_keys  # every key kept, in order
    assert cli(capsys, "lint", str(bad))[0] == 0
    assert cli(capsys, "fix", str(bad))[0] == 0  # nothing left
    assert load_model(bad).safetensors is not None


def test_fix_missing_required_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf4", max_position_embeddings=sk.DROP))
    assert cli(capsys, "fix", str(d), "--write")[0] == 0
    assert json.loads((d / "config.json").read_text())["max_position_embeddings"] == 2048
    assert cli(capsys, "lint", str(d))[0] == 0


@pytest.mark.parametrize(
    "override,code",
    [
        ({"head_dim": 32}, "PK104"),
        ({"attention_bias": True}, "PK105"),
        ({"mlp_bias": True}, "PK106"),
        ({"hidden_act": "gelu"}, "PK107"),
    ],
)
def test_fix_writes_the_safe_edit_and_reports_what_no_config_edit_fixes(
    override: dict, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf5", **override), weights=False)
    rc, out, err = cli(capsys, "fix", str(d), "--write")
    assert rc == 1 and out == "" and "fixed 1 finding (PK101)" in err and f"\n{code} " in err and "  reason: " in err, (
        err
    )
    assert json.loads((d / "config.json").read_text())["rope_theta"] == 100000.0
    rc, out, err = cli(capsys, "fix", str(d))  # nothing left to write, the finding still there
    assert rc == 1 and out == "" and "would remain" in err and code in err


def test_verify_subcommand_is_lazy(capsys: pytest.CaptureFixture[str]) -> None:
    code = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from portkit.cli import main; main(['rules']); print(sorted(m for m in sys.modules if "
            "m.startswith('portkit.verify')))",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert code.stdout.strip().endswith("[]"), code.stdout[-300:]


def test_verify_subcommand_is_wired(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "verify" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["verify", "--help"])
    assert e.value.code == 0 and "MODEL_DIR" in capsys.readouterr().out


def test_lint_never_imports_torch_or_transformers(tmp_path: Path) -> None:
    bad = tf5_model(tmp_path)
    sk.write_gguf(bad / "m.gguf", sk.llama_metadata(sk.config("tf4")), sk.gguf_tensors(sk.config("tf4")))
    prog = (
        "import sys, portkit\nfrom portkit.cli import main\n"
        f"rc = main(['lint', {str(bad)!r}, '--format', 'json', '--output', {str(tmp_path / 'o.json')!r}])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))\nprint(rc, heavy)\n"
    )
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.strip() == "1 []", r.stdout + r.stderr


# What `portkit lint` must never import: it runs as a pre-commit hook, and each of these
# costs more than the lint itself (pydantic only builds the JSON Schema, rich only colours a
# terminal, numpy only dequantizes for PK410, importlib.metadata: `portkit.__version__`).
HEAVY = (
    "pydantic",
    "pydantic_core",
    "rich",
    "torch",
    "transformers",
    "numpy",
    "gguf",
    "safetensors",
    "jsonschema",
    "importlib.metadata",
    "huggingface_hub",
)


@pytest.mark.parametrize(
    "which,fmt", [("good", "text"), ("bad", "text"), ("bad", "json"), ("bad", "sarif"), ("bad", "github")]
)
def test_lint_imports_nothing_heavy(which: str, fmt: str, tmp_path: Path) -> None:
    d = sk.write_model(tmp_path / "good", sk.config("tf4")) if which == "good" else tf5_model(tmp_path)
    prog = (
        "import json, sys\nfrom portkit.cli import main\n"
        f"rc = main(['lint', {str(d)!r}, '--format', {fmt!r}, '--output', {str(tmp_path / 'out')!r}])\n"
        f"heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in {HEAVY!r}))\n"
        "print(json.dumps([rc, heavy]))\n"
    )
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    rc, heavy = json.loads(r.stdout)
    assert rc == (0 if which == "good" else 1)
    assert heavy == [], f"`portkit lint --format {fmt}` imported {heavy}"
    assert (tmp_path / "out").read_text()


def test_console_script_runs(tmp_path: Path) -> None:
    bad = tf5_model(tmp_path)
    r = subprocess.run([sys.executable, "-m", "portkit", "lint", str(bad)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "PK101" in r.stdout and r.stderr == ""


def test_file_args_in_a_dir_without_model_are_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What pre-commit passes: a changed safetensors file in a PEFT adapter dir is not a model."""
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"x")
    model = tf5_model(tmp_path)
    code, out, err = cli(capsys, "lint", str(adapter / "adapter_model.safetensors"), str(model / "config.json"))
    assert code == 1 and "PK101" in out  # the real model is still linted
    assert "skipped: no config.json or .gguf" in err and "error" not in err
    # asked for as a directory, it is still an error
    code, _, err = cli(capsys, "lint", str(adapter))
    assert code == 2 and "no config.json" in err


def test_fix_diff_headers_are_relative_to_cwd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tf5_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, "fix", model.name, "--diff")
    assert code == 1
    assert out.startswith(f"--- a/{model.name}/config.json\n+++ b/{model.name}/config.json\n"), out[:200]
