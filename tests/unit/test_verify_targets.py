"""`portkit verify A B ...` (portkit.verify.targets) without candle or transformers: the run's exit
status is the worst by `EXIT_ORDER` (bad input 2 over non-finite 3 over mismatch 1 over agree 0),
and every target gives one outcome, in order, however the batches fall (`BATCH`)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from portkit.verify import targets
from portkit.verify.pipeline import VerifyOptions

VERDICT = {0: "agree", 1: "mismatch", 3: "non-finite"}


@pytest.mark.parametrize(
    ("codes", "want"),
    [
        ([3, 2], 2),
        ([2, 3], 2),
        ([1, 3], 3),
        ([3, 1], 3),
        ([0, 1], 1),
        ([1, 0, 0], 1),
        ([0, 0], 0),
        ([], 0),
        ([2], 2),
        ([0, 1, 3, 2, 1], 2),
    ],
    ids=[
        "nonfinite_then_bad",
        "bad_then_nonfinite",
        "mismatch_then_nonfinite",
        "nonfinite_then_mismatch",
        "agree_then_mismatch",
        "mismatch_first",
        "all_agree",
        "none",
        "one_bad",
        "every_kind",
    ],
)
def test_the_worst_exit_follows_exit_order_not_the_largest_number(codes: list[int], want: int) -> None:
    """A missing directory (2) beside a non-finite model (3) exits 2: bad input is the worst,
    though 3 is the larger number."""
    assert targets.worst(codes) == want


class _Session:
    def __init__(self, *_a, **_k) -> None:
        self.alternation = SimpleNamespace(on=False, trim=None, hold=lambda: None, done=lambda: False)

    @contextlib.contextmanager
    def candle_first(self):
        yield

    def close(self) -> None:
        pass


def _stub_sides(monkeypatch: pytest.MonkeyPatch, exit_codes: dict[str, int], begun: list[str]) -> None:
    """verify_each's candle and transformers sides replaced: `begin` of a directory named in
    `exit_codes` gives a report with that exit code; any other goes to the real `begin`."""
    from portkit.verify import pipeline
    from portkit.verify.candle import native as native_mod
    from portkit.verify.reference import session as session_mod

    real_begin = pipeline.begin

    def begin(opts, progress=lambda _s: None, session=None):  # noqa: ANN001
        name = Path(opts.model_dir).name
        if name not in exit_codes:
            return real_begin(opts, progress, session)
        begun.append(name)
        code = exit_codes[name]
        report = SimpleNamespace(
            family="llama", exit_code=code, seconds=0.0, confirmed=[], verdict=lambda: (VERDICT[code], "")
        )
        return pipeline.Unfinished(finish=lambda: report)

    monkeypatch.setattr(pipeline, "begin", begin)
    monkeypatch.setattr(native_mod, "native", lambda: SimpleNamespace(release_memory=lambda: False))
    monkeypatch.setattr(session_mod, "ReferenceSession", _Session)
    monkeypatch.setattr(targets, "_release", lambda: None)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 8, 9])
def test_every_target_gives_one_outcome_in_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, n: int) -> None:
    """With BATCH (4) models begun at a time, each target is verified once and reported in the
    order given: a batch one short would drop a model from every full batch, silently."""
    labels = [f"m{i}" for i in range(n)]
    begun: list[str] = []
    _stub_sides(monkeypatch, {name: 0 for name in labels}, begun)
    emitted: list[str] = []
    out = targets.verify_each(
        VerifyOptions(model_dir=tmp_path),
        [(name, tmp_path / name) for name in labels],
        lambda _p, _s: None,
        lambda label, _r: emitted.append(label),
        lambda label, line: pytest.fail(f"{label}: {line}"),
    )
    assert [o.target for o in out] == labels
    assert emitted == begun == labels


def test_batches_of_two_cover_five_targets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(targets, "BATCH", 2)
    labels = [f"m{i}" for i in range(5)]
    begun: list[str] = []
    _stub_sides(monkeypatch, {name: 0 for name in labels}, begun)
    out = targets.verify_each(
        VerifyOptions(model_dir=tmp_path),
        [(name, tmp_path / name) for name in labels],
        lambda _p, _s: None,
        lambda _l, _r: None,
        lambda label, line: pytest.fail(f"{label}: {line}"),
    )
    assert [o.target for o in out] == begun == labels


def test_cli_a_missing_directory_beside_a_nonfinite_model_exits_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    """`portkit verify NAN MISSING`: the missing directory is one line (the real `begin`'s bad
    input), the other model still runs, and the exit is 2, the worst, not 3, the largest."""
    from portkit.verify import cli
    from portkit.verify.report import json_

    begun: list[str] = []
    _stub_sides(monkeypatch, {"nan": 3, "differs": 1}, begun)
    monkeypatch.setattr(json_, "to_json", lambda report: {"exit_code": report.exit_code})
    missing = tmp_path / "missing"
    assert cli.main([str(tmp_path / "nan"), str(missing), "--format", "json"]) == 2
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [(s["target"], s["exit_code"]) for s in doc["summary"]] == [(str(tmp_path / "nan"), 3), (str(missing), 2)]
    assert doc["exit_code"] == 2 and begun == ["nan"] and f"{missing}" in captured.err
    # negative control: a non-finite model beside a mismatch exits 3
    assert cli.main([str(tmp_path / "differs"), str(tmp_path / "nan"), "--format", "json"]) == 3
