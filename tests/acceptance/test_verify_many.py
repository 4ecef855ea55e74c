"""Issue 36: many targets in one verify.

- several `--gguf` (a quant ladder): one reference and one HF-checkpoint run, one section per file,
  each the same as its own `--gguf` run's, a summary table, the worst exit, JSON `ggufs`;
- several model directories: one transformers process for all, each report the one `portkit
  verify DIR` alone gives, a summary, the worst exit; a bad directory is one line, the others run.

Reports are compared with reports of the same code on this machine (minus times), never with
floats written down here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from portkit.verify.pipeline import VerifyOptions, verify
from portkit.verify.report.json_ import to_json
from tests.acceptance.report_cases import normalised

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "verify-report.schema.json").read_text())


@pytest.fixture(scope="module")
def ladder(gguf_file) -> list[Path]:
    """An F32, a Q8_0 and a GGUF whose Q/K rows were never permuted (candle's quantized_llama reads it wrong)."""
    return [
        gguf_file("healthy-tied", qtype="f32"),
        gguf_file("healthy-tied", qtype="q8_0"),
        gguf_file("healthy-tied", qtype="f32", permute_qk=False),
    ]


@pytest.fixture(scope="module")
def inprocess():
    mp = pytest.MonkeyPatch()
    mp.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    yield
    mp.undo()


#: what says where a number came from (computed, or the cache the first run filled), not what it is
FROM_WHERE = ("source", "candle_runs", "reference_runs")


def _plain(doc: object, work: Path) -> object:
    def drop(v: object) -> object:
        if isinstance(v, dict):
            return {k: drop(x) for k, x in v.items() if k not in FROM_WHERE}
        return [drop(x) for x in v] if isinstance(v, list) else v

    return drop(normalised(doc, work))


def test_a_quant_ladder_is_one_reference_and_a_section_per_file(
    healthy_tied_dir: Path, ladder: list[Path], inprocess, tmp_path: Path
) -> None:
    rep = verify(VerifyOptions(model_dir=healthy_tied_dir, ggufs=tuple(ladder), tokens=4))
    assert [g.path for g in rep.ggufs] == ladder and rep.gguf is rep.ggufs[0]
    # the file without its Q/K permutation differs: the exit is the worst, the verdict names it
    assert [g.ok for g in rep.ggufs] == [True, True, False]
    assert rep.exit_code == 1 and f"the GGUF {ladder[2].name} differs from transformers" in rep.verdict()[1]
    doc = to_json(rep)
    jsonschema.validate(doc, SCHEMA)
    assert len(doc["ggufs"]) == 3 and doc["gguf"] == doc["ggufs"][0]
    # one reference, one candle run of the checkpoint: each section is what its own --gguf run gives
    for path, section in zip(ladder, doc["ggufs"], strict=False):
        alone = to_json(verify(VerifyOptions(model_dir=healthy_tied_dir, gguf=path, tokens=4)))
        assert _plain(section, tmp_path) == _plain(alone["gguf"], tmp_path), path.name
        assert "ggufs" not in alone  # one --gguf: the report it always was


def test_the_ladder_summary_table(healthy_tied_dir: Path, ladder: list[Path], inprocess) -> None:
    from portkit.verify.report.text import gguf_summary_rows

    rep = verify(VerifyOptions(model_dir=healthy_tied_dir, ggufs=tuple(ladder), tokens=4))
    rows = gguf_summary_rows(rep)
    assert [r[0] for r in rows] == [p.name for p in ladder]
    assert [r[1] for r in rows] == ["F32", "Q8_0", "F32"]
    assert [r[-1] for r in rows] == ["agrees", "agrees", "differs"]
    assert rows[2][5] != "-"  # the unpermuted file's finding is confirmed


def test_gguf_directories_and_globs(healthy_tied_dir: Path, ladder: list[Path], tmp_path: Path) -> None:
    from portkit.verify.cli import expand_ggufs
    from portkit.verify.errors import BadInput

    d = tmp_path / "ladder"
    d.mkdir()
    for i, p in enumerate(ladder[:2]):
        (d / f"m-{i}.gguf").symlink_to(p)
    assert expand_ggufs([str(d)]) == [d / "m-0.gguf", d / "m-1.gguf"]
    assert expand_ggufs([str(d / "*.gguf"), str(d / "m-0.gguf")]) == [d / "m-0.gguf", d / "m-1.gguf"]
    with pytest.raises(BadInput, match="matches no file"):
        expand_ggufs([str(d / "*.bin")])
    out = subprocess.run(
        [sys.executable, "-m", "portkit", "verify", str(healthy_tied_dir), "--gguf", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "a directory with no .gguf file" in out.stderr and out.stderr.count("\n") == 1, (
        out.stderr
    )


def test_several_models_share_one_transformers_process(fixture_dir, tmp_path: Path, monkeypatch) -> None:
    """In the child process, as the CLI runs it: the child starts once for every model."""
    from portkit.verify.reference import child
    from portkit.verify.targets import verify_each

    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "child")
    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "cache"))  # nothing cached: transformers computes each
    started = []
    real_init = child.ServedReference.__init__

    def counting(self, progress, alternation=None):
        started.append(1)
        real_init(self, progress, alternation)

    monkeypatch.setattr(child.ServedReference, "__init__", counting)
    dirs = [fixture_dir("healthy-tied"), fixture_dir("rope-theta-in-rope-parameters")]
    reports: dict[str, object] = {}
    events: list[tuple[str, str]] = []

    def emitted(label: str, r: object) -> None:
        reports[label] = r
        events.append(("emit", label))

    outcomes = verify_each(
        VerifyOptions(model_dir=dirs[0], tokens=4),
        [(str(d), d) for d in dirs],
        lambda p, s: events.append((p, s)),
        emitted,
        lambda _l, _e: None,
    )
    assert len(started) == 1
    # the second model's candle ran while transformers computed the first's reference
    second_candle = next(i for i, (p, s) in enumerate(events) if p.startswith("[2/2]") and s.startswith("candle"))
    assert second_candle < events.index(("emit", str(dirs[0]))) < events.index(("emit", str(dirs[1])))
    assert [o.exit_code for o in outcomes] == [0, 1] and outcomes[1].confirmed == ["PK101"]
    # each report is the one the model alone gives, computed again (not read from the cache the
    # run above filled): its f64 truth sent apart, after the candle runs, changes no number
    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "alone"))
    for d in dirs:
        alone = verify(VerifyOptions(model_dir=d, tokens=4))
        assert _plain(to_json(reports[str(d)]), tmp_path) == _plain(to_json(alone), tmp_path), d


def test_several_models_on_the_command_line(fixture_dir, tmp_path: Path) -> None:
    a, b = fixture_dir("healthy-tied"), fixture_dir("llama3-sampling")
    argv = [sys.executable, "-m", "portkit", "verify", str(a), str(tmp_path / "missing"), str(b), "--tokens", "4"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr  # the worst: the missing directory is bad input
    assert out.stderr.count("portkit: error:") == 1 and "missing: no such directory" in out.stderr
    assert f"==> {a} <==" in out.stdout and f"==> {b} <==" in out.stdout
    assert "3 models, one transformers process" in out.stdout
    # 8 steps: at 4, generate()'s implicit top-k changes no step of this tiny model (PK510 NOT-REPRODUCED)
    out = subprocess.run([*argv[:5], str(b), "--format", "json"], capture_output=True, text=True, timeout=300)
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and doc["exit_code"] == 0
    assert [s["verdict"] for s in doc["summary"]] == ["agree", "agree"] and doc["summary"][1]["confirmed"] == ["PK510"]
    for t in doc["targets"]:
        jsonschema.validate(t["report"], SCHEMA)
