"""The reference cache end to end (`portkit verify` in subprocesses, as a user runs it): the first
run computes and stores the reference, an unchanged re-verify reads it without importing torch
(a poisoned `torch` first on the path would fail it), a truncated entry is detected, recomputed
and rewritten, and --no-cache bypasses it. candle's run cache the same way, and with a GGUF and
each finding's counterfactual runs. Plus the non-finite verdict (exit 3) on a checkpoint
with one NaN weight."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "verify-report.schema.json").read_text())


def _env(cache: Path, poison: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, PORTKIT_CACHE=str(cache))
    env.pop("PORTKIT_VERIFY_REFERENCE", None)  # the child process, as users run it
    path = ([str(poison)] if poison else []) + [str(ROOT)]  # the poison first: it shadows the real torch
    env["PYTHONPATH"] = os.pathsep.join(path + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _verify(model: Path, env: dict[str, str], *extra: str) -> tuple[int, dict, str]:
    p = subprocess.run(
        [sys.executable, "-m", "portkit.cli", "verify", str(model), "--format", "json", "--tokens", "4", *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    if doc:
        jsonschema.validate(doc, SCHEMA)
    return p.returncode, doc, p.stderr


def _verify_text(model: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The text report, as a user reads it."""
    return subprocess.run(
        [sys.executable, "-m", "portkit.cli", "verify", str(model), "--tokens", "4"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _poisoned_torch(tmp_path: Path) -> Path:
    d = tmp_path / "poison"
    for name in ("torch", "transformers"):
        (d / name).mkdir(parents=True)
        (d / name / "__init__.py").write_text(f"raise ImportError('{name} was imported')\n")
    return d


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "reference").glob("*/*.ref"))


def test_unchanged_reverify_reads_the_cache_without_torch(tmp_path: Path, healthy_tied_dir: Path) -> None:
    cache = tmp_path / "cache"
    code, first, err = _verify(healthy_tied_dir, _env(cache))
    assert code == 0, err
    assert first["reference"]["source"] == "computed" and first["reference"]["mode"] == "streamed"
    assert set(first["timings"]) >= {"load", "candle", "reference", "compare"}
    (entry,) = _entries(cache)

    poison = _poisoned_torch(tmp_path)
    # negative control: the poison works (a run that must compute fails to import torch)
    code, _, err = _verify(healthy_tied_dir, _env(cache, poison), "--no-cache")
    assert code == 2 and "torch was imported" in err

    code, second, err = _verify(healthy_tied_dir, _env(cache, poison))
    assert code == 0, err
    assert second["reference"]["source"] == "cache"
    assert second["comparison"] == first["comparison"]

    # truncated: detected, recomputed (torch needed again), rewritten
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 3])
    code, _, err = _verify(healthy_tied_dir, _env(cache, poison))
    assert code == 2 and "torch was imported" in err
    code, third, err = _verify(healthy_tied_dir, _env(cache))
    assert code == 0 and third["reference"]["source"] == "computed", err
    assert third["comparison"] == first["comparison"]
    code, fourth, err = _verify(healthy_tied_dir, _env(cache, poison))
    assert code == 0 and fourth["reference"]["source"] == "cache", err


def test_a_changed_weight_misses_the_cache(tmp_path: Path, healthy_tied_dir: Path) -> None:
    cache = tmp_path / "cache"
    model = tmp_path / "model"
    shutil.copytree(healthy_tied_dir, model)
    assert _verify(model, _env(cache))[0] == 0
    st = model / "model.safetensors"
    raw = bytearray(st.read_bytes())
    raw[-3] ^= 0x01  # the last float's low mantissa bits: same size, same header
    st.write_bytes(bytes(raw))
    code, doc, err = _verify(model, _env(cache, _poisoned_torch(tmp_path)))
    assert code == 2 and "torch was imported" in err


def _with_nan(tmp_path: Path, src: Path, name: str) -> Path:
    out = tmp_path / "nan-model"
    shutil.copytree(src, out)
    f = out / "model.safetensors"
    raw = bytearray(f.read_bytes())
    (n,) = np.frombuffer(bytes(raw[:8]), dtype="<u8")
    header = json.loads(bytes(raw[8 : 8 + int(n)]))
    info = header[name]
    assert info["dtype"] == "F32"
    start = 8 + int(n) + info["data_offsets"][0]
    raw[start : start + 4] = np.array([np.nan], dtype="<f4").tobytes()
    f.write_bytes(bytes(raw))
    return out


def test_nan_weight_is_its_own_verdict(tmp_path: Path, healthy_tied_dir: Path) -> None:
    name = "model.layers.1.mlp.down_proj.weight"
    model = _with_nan(tmp_path, healthy_tied_dir, name)
    code, doc, err = _verify(model, _env(tmp_path / "cache"))
    assert code == 3, err
    assert doc["verdict"] == "non-finite" and doc["exit_code"] == 3
    nf = doc["nonfinite"]
    assert nf["checkpoint_tensors"] == [name]
    # named at the sub-layer whose weight it is (both sides record layer.1's sub-layers)
    assert nf["reference_first"] == nf["candle_first"] == "layer.1.mlp" and nf["first_side"] == "both"
    rows = {r["name"]: r for r in doc["comparison"]["layers"]["rows"]}
    assert rows["layer.0"]["nonfinite"] is None and rows["layer.1"]["nonfinite"] == "both"
    assert doc["comparison"]["layers"]["first_over"] is None  # never a finite layer cited
    p = _verify_text(model, _env(tmp_path / "cache"))
    assert p.returncode == 3
    assert (
        "NON-FINITE: the checkpoint holds non-finite weights (model.layers.1.mlp.down_proj.weight); both sides turn "
        "non-finite at layer.1.mlp" in p.stdout
    )
    assert "MISMATCH" not in p.stdout


def _runs(cache: Path) -> list[Path]:
    return sorted((cache / "candle").glob("*/*.run"))


def test_unchanged_reverify_reads_candle_from_the_cache(tmp_path: Path, healthy_tied_dir: Path) -> None:
    from portkit.verify import cachefiles
    from portkit.verify.candle import cache as runcache

    cache = tmp_path / "cache"
    code, first, err = _verify(healthy_tied_dir, _env(cache))
    assert code == 0, err
    assert first["candle"]["source"] == "computed" and first["candle_runs"]["cached"] == 0
    (entry,) = _runs(cache)

    code, second, err = _verify(healthy_tied_dir, _env(cache))
    assert code == 0, err
    assert second["candle"]["source"] == "cache" and second["candle_runs"] == {"total": 1, "cached": 1}
    assert second["comparison"] == first["comparison"]

    # the report judges the cached numbers: one logit moved by 1e-3 in a well-formed entry is a MISMATCH
    meta, arrays = cachefiles.decode(runcache.MAGIC, entry.read_bytes())
    arrays["rows"][0, 0] += 1e-3
    entry.write_bytes(cachefiles.encode(runcache.MAGIC, meta, arrays))
    code, tampered, err = _verify(healthy_tied_dir, _env(cache))
    assert code == 1 and tampered["candle"]["source"] == "cache" and tampered["verdict"] == "mismatch", err

    # truncated: detected, candle runs again, the entry is rewritten
    entry.write_bytes(entry.read_bytes()[:100])
    code, third, err = _verify(healthy_tied_dir, _env(cache))
    assert code == 0 and third["candle"]["source"] == "computed", err
    assert third["comparison"] == first["comparison"]
    assert _runs(cache) == [entry] and cachefiles.decode(runcache.MAGIC, entry.read_bytes()) is not None

    code, fourth, err = _verify(healthy_tied_dir, _env(cache), "--no-cache")
    assert code == 0 and fourth["candle"]["source"] == "computed" and fourth["reference"]["source"] == "computed", err

    p = _verify_text(healthy_tied_dir, _env(cache))
    assert p.returncode == 0
    assert "(portkit_native, cpu, f32, from the cache)" in p.stdout
    assert "candle: 1 of 1 run read from the cache" in p.stdout


def test_counterfactual_and_gguf_runs_are_cached(tmp_path: Path, fixture_dir, monkeypatch) -> None:
    """Every candle run of a verify with findings on the checkpoint and on its GGUF is read back on
    an unchanged re-verify, with the same verdicts, and no edited GGUF is written for a cached run."""
    from fixtures.gguf_writer import write_gguf
    from portkit.verify.candle import gguf_edit as gguf_rewrite
    from portkit.verify.pipeline import VerifyOptions, verify

    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    d = fixture_dir("rope-theta-in-rope-parameters")
    gguf = write_gguf(d, tmp_path / "model.gguf", freq_base=False)
    rewrites = []
    real = gguf_rewrite.rewrite_gguf
    monkeypatch.setattr(gguf_rewrite, "rewrite_gguf", lambda *a, **k: (rewrites.append(1), real(*a, **k))[1])

    first = verify(VerifyOptions(model_dir=d, gguf=gguf, tokens=4))
    assert first.candle_runs["total"] >= 3 and first.candle_runs["cached"] == 0
    assert rewrites, "the GGUF finding's counterfactual wrote an edited copy"
    rewrites.clear()

    second = verify(VerifyOptions(model_dir=d, gguf=gguf, tokens=4))
    assert second.candle_runs == {"total": first.candle_runs["total"], "cached": first.candle_runs["total"]}
    assert rewrites == []
    verdicts = lambda rep: [(f.code, f.verdict, f.evidence) for f in rep.all_findings]  # noqa: E731
    assert verdicts(second) == verdicts(first) and any(v == "CONFIRMED" for _, v, _ in verdicts(first))
    assert (
        second.gguf is not None and second.gguf.run.source == "cache" and second.gguf.diagnosis == first.gguf.diagnosis
    )
