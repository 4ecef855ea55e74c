"""`portkit verify --candle 0.11.0`: candle 0.11.0's own crates, built from native/ on first use, and the wheel's
0.11.1 judge the checkpoints whose findings 0.11.0 has and 0.11.1 fixed, as a user runs them (a `portkit`
process: the release's runner is chosen before portkit_native is imported).

- a qwen3_moe checkpoint in f16 with a batch of two: PK311 on 0.11.0, CRASH-CONFIRMED there (the f16 cast of
  the undersized mask panics); on 0.11.1
  no PK311, and every batch row agrees with transformers;
- a BERT whose LayerNorms are named `gamma`/`beta`: PK623 on 0.11.0, CRASH-CONFIRMED by candle's own
  load error; on 0.11.1 no finding, the checkpoint loads and agrees with sentence-transformers;
- bf16 on the CPU: PK301 on 0.11.0, CRASH-CONFIRMED (no BF16 matmul there); 0.11.1 runs and agrees;
- a tokenizer.json whose Split pattern has `\\R`: onig (0.11.0's crate) reads it, fancy-regex (0.11.1's)
  refuses it: PK507 on 0.11.1 only, CRASH-CONFIRMED there with the crate's own message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.embedding_models import embedding_model
from fixtures.families import family_fixture


def _verify(*argv: object, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "portkit", "verify", *map(str, argv), "--format", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=3000,
    )
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, doc, proc.stderr


ROOT = Path(__file__).resolve().parents[2]


def _locked(name: str, lock: Path = ROOT / "native" / "Cargo.lock") -> str:
    import tomllib

    (version,) = {p["version"] for p in tomllib.loads(lock.read_text())["package"] if p["name"] == name}
    return version


def _codes(doc: dict) -> dict[str, str]:
    """Every finding's verdict: the report's and each --turns/--batch section's."""
    sections = (doc.get("paths") or {}).get("sections", [])
    return {
        f["code"]: f["verdict"]
        for f in [*doc.get("findings", []), *(f for s in sections for f in s.get("findings", []))]
    }


def test_a_batch_of_two_in_qwen3_moe_is_wrong_on_0_11_0_and_right_on_0_11_1() -> None:
    d = family_fixture("qwen3_moe", "legacy")
    code, doc, err = _verify(d, "--dtype", "f16", "--batch", "2", "--candle", "0.11.0")
    assert doc["versions"]["candle"] == "0.11.0", err[-2000:]
    assert doc["versions"]["tokenizers"] == _locked(
        "tokenizers", ROOT / "native" / "releases" / "0.11.0" / "Cargo.lock"
    )
    assert _codes(doc).get("PK311") == "CRASH-CONFIRMED", (code, _codes(doc), err[-2000:])
    code, doc, err = _verify(d, "--dtype", "f16", "--batch", "2", "--candle", "0.11.1")
    assert doc["versions"]["candle"] == "0.11.1", err[-2000:]
    assert doc["versions"]["tokenizers"] == _locked("tokenizers") == "0.23.2"
    assert "PK311" not in _codes(doc)
    batch = [c for s in doc["paths"]["sections"] for c in s["checks"] if c["path"] == "batch"]
    assert batch and all(c["ok"] and c["run"]["status"] != "failed" for c in batch), batch
    assert code == 0, (_codes(doc), err[-2000:])


def test_a_batch_of_two_in_glm4_fails_on_0_11_0_and_still_fails_on_0_11_1() -> None:
    """0.11.1 fixes glm4_new's mask (PK311) but not its rotary embedding, which keeps row 0 (PK322)."""
    d = family_fixture("glm4_new", "legacy")
    code, doc, err = _verify(d, "--batch", "2", "--candle", "0.11.0")
    assert _codes(doc) == {"PK311": "CRASH-CONFIRMED"}, (code, _codes(doc), err[-2000:])
    code, doc, err = _verify(d, "--batch", "2", "--candle", "0.11.1")
    assert doc["versions"]["candle"] == "0.11.1", err[-2000:]
    assert _codes(doc) == {"PK322": "CRASH-CONFIRMED"}, (code, _codes(doc), err[-2000:])
    batch = [c for s in doc["paths"]["sections"] for c in s["checks"] if c["path"] == "batch"]
    assert batch and "shape mismatch in matmul" in batch[0]["run"]["failure"]["message"], batch
    assert code == 1


def test_a_bert_with_gamma_beta_layernorms_crashes_on_0_11_0_and_loads_on_0_11_1() -> None:
    d = embedding_model("bert", gamma_beta=True)
    code, doc, err = _verify(d, "--candle", "0.11.0")
    assert _codes(doc).get("PK623") == "CRASH-CONFIRMED", (code, _codes(doc), err[-2000:])
    assert "cannot find tensor embeddings.LayerNorm.weight" in json.dumps(doc)
    code, doc, err = _verify(d, "--candle", "0.11.1")
    assert doc["versions"]["candle"] == "0.11.1", err[-2000:]
    assert "PK623" not in _codes(doc)
    assert code == 0 and doc["verdict"] == "agree", (code, _codes(doc), err[-2000:])
    assert doc["texts"] and all(t["ok"] for t in doc["texts"]) and doc["batch"]["ok"]


def test_bf16_on_the_cpu_fails_on_0_11_0_and_runs_on_0_11_1() -> None:
    """0.11.1 widens a BF16 matmul on the CPU to f32 (candle-core cpu_backend/mod.rs:3062-3071): PK301 is 0.11.0's."""
    from fixtures.cache import fixture_dir

    d = fixture_dir("bf16-weights")
    code, doc, err = _verify(d, "--dtype", "bf16", "--candle", "0.11.0")
    assert _codes(doc) == {"PK301": "CRASH-CONFIRMED"}, (code, _codes(doc), err[-2000:])
    assert "unsupported dtype BF16 for op matmul" in json.dumps(doc) and code == 1
    code, doc, err = _verify(d, "--dtype", "bf16", "--candle", "0.11.1")
    assert code == 0 and doc["verdict"] == "agree" and not _codes(doc), (code, _codes(doc), err[-2000:])


def test_a_module_the_release_does_not_have_is_one_line() -> None:
    """nomic_bert.rs arrived in 0.10.0: on 0.9.2 there is no module to run, one line and exit 2, and no runner is
    built for it; a release portkit does not know is one line too."""
    code, doc, err = _verify(embedding_model("nomic_bert"), "--candle", "0.9.2")
    assert code == 2 and not doc
    assert err.count("\n") == 1 and "candle 0.9.2 has no `nomic_bert` module, it arrived in 0.10.0" in err, err
    code, doc, err = _verify(embedding_model("bert"), "--candle", "0.8.0")
    assert code == 2 and not doc and err.count("\n") == 1 and "is not a release portkit knows" in err, err


def test_a_failed_build_is_cargos_last_error_and_leaves_nothing(tmp_path: Path) -> None:
    """A cargo that fails (a PATH whose `cargo` exits 101 with cargo's error layout): cargo's error on one line
    (not its closing "could not compile"), exit 2, no cache entry."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "cargo").write_text(
        "#!/bin/sh\necho '   Compiling candle-core v0.11.0'\necho 'error[E0599]: no method named `x` found' >&2\n"
        "echo 'error: could not compile `candle-core` (lib) due to 1 previous error' >&2\nexit 101\n"
    )
    (fake / "cargo").chmod(0o755)
    cache = tmp_path / "cache"
    code, doc, err = _verify(
        embedding_model("bert"),
        "--candle",
        "0.11.0",
        env={"PATH": f"{fake}:{os.environ['PATH']}", "PORTKIT_CACHE": str(cache)},
    )
    assert code == 2 and not doc
    assert err.strip().splitlines()[-1].endswith("error[E0599]: no method named `x` found"), err
    assert (
        not [p for p in (cache / "native").glob("*") if not p.name.startswith("target")]
        if (cache / "native").is_dir()
        else True
    )


def test_a_pattern_fancy_regex_cannot_parse_is_refused_on_0_11_1_only(tmp_path: Path) -> None:
    import shutil

    from fixtures.tokenizer_shapes import shape_dir

    d = tmp_path / "tok"
    shutil.copytree(shape_dir("llama3", "clean"), d)
    doc = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))
    split = doc["pre_tokenizer"]["pretokenizers"][0]
    split["pattern"]["Regex"] = "\\R+|" + split["pattern"]["Regex"]
    (d / "tokenizer.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    code, doc, err = _verify(d, "--candle", "0.11.1")
    (pk507,) = [f for f in doc["tokenizer"]["findings"] if f["code"] == "PK507"]
    assert pk507["verdict"] == "CRASH-CONFIRMED" and "Invalid escape: \\R" in pk507["evidence"], (pk507, err[-2000:])
    assert code == 1 and doc["versions"]["tokenizers crate"] == "0.23.2"
    code, doc, err = _verify(d, "--candle", "0.11.0")
    assert code == 0 and doc["verdict"] == "agree" and not doc["tokenizer"]["findings"], (doc, err[-2000:])


def test_no_cargo_is_one_line(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    code, _, err = _verify(
        embedding_model("bert"), "--candle", "0.11.0", env={"PATH": "/nonexistent", "PORTKIT_CACHE": str(cache)}
    )
    assert code == 2 and "cargo is not on PATH" in err and err.strip().count("\n") == 0, err


@pytest.mark.parametrize("release", ["0.11.0"])
def test_the_runner_built_for_a_release_reports_that_release(release: str) -> None:
    """The build's candle and tokenizers crates come from its own Cargo.lock (native/build.rs), not a literal."""
    from portkit.verify.candle import release_build

    site = release_build.ensure(release, lambda _: None)
    out = subprocess.run(
        [sys.executable, "-c", "import json, portkit_native as p; print(json.dumps(p.build_info()))"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        check=True,
    ).stdout
    info = json.loads(out)
    lock = (Path(release_build.NATIVE_SOURCE) / "releases" / release / "Cargo.lock").read_text()
    assert info["candle_version"] == release
    assert f'name = "tokenizers"\nversion = "{info["tokenizers_version"]}"' in lock
