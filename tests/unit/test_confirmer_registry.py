"""Every probe a rule can emit has exactly one confirmer on the run it needs
(`portkit.verify.judge.registry`), and every confirmer named there exists."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from portkit import findings as F
from portkit.rules import RULES
from portkit.verify.judge.registry import CONFIRMERS, confirmer

#: the probe class `declared_probe` builds for a rule's `probe_kind` (`Rule.finding` without `probe=`)
_DECLARED = {"numeric": F.CandleEdit, "crash": F.ExpectedCrash, "static-only": F.NotProbed, "tokens": F.TokenizerEdit}


def _emitted(rule: object) -> set[type[F.Probe]]:
    """The probe classes a rule builds: its `probe_of(...)` classes, and its kind's (a rule may
    override the kind per finding: `probe_kind=` in its source)."""
    own = [
        c
        for c in type(rule).__mro__
        if c.__module__.startswith("portkit.rules") and c.__module__ != "portkit.rules.base"
    ]
    src = "\n".join(inspect.getsource(c) for c in own)
    out = {getattr(F, name) for name in re.findall(r"probe_of\(\s*(\w+)", src) if hasattr(F, name)}
    kinds = {rule.probe_kind, *re.findall(r'probe_kind="([\w-]+)"', src)}  # type: ignore[attr-defined]
    if "probe_of(" not in src or re.search(r"probe_(patch|kind)=", src):
        out |= {_DECLARED[k] for k in kinds if k in _DECLARED}
    return out


@pytest.mark.parametrize("code", sorted(RULES))
def test_every_probe_a_rule_emits_has_a_confirmer_on_its_run(code: str) -> None:
    rule = RULES[code]
    for cls in _emitted(rule):
        probe = cls.__new__(cls)
        object.__setattr__(probe, "run", rule.probe_run)
        assert confirmer(probe) is not None, f"{code}: no confirmer reads a {cls.__name__} on the {rule.probe_run} run"
        if rule.probe_run == "embedding" and cls is F.CandleEdit:
            # an embedding run has no config edit to run: such a probe names what it counts
            assert rule.probe_measure is not None, f"{code}: a CandleEdit on the embedding run names no measure"


def test_every_named_confirmer_exists() -> None:
    names = {name for by_class in CONFIRMERS.values() for name in by_class.values()}
    for name in names:
        module, function = name.split(":")
        assert callable(getattr(importlib.import_module(module), function, None)), name


def test_every_probe_class_is_confirmed_somewhere() -> None:
    classes = {c for c in vars(F).values() if isinstance(c, type) and issubclass(c, F.Probe) and c is not F.Probe}
    registered = {c for by_class in CONFIRMERS.values() for c in by_class}
    assert classes == registered


def test_a_probe_on_a_run_that_does_not_read_it_has_no_confirmer() -> None:
    assert confirmer(F.TokenizerEdit(id="x", run="prompt")) is None
    assert confirmer(F.SamplingDifference(id="x", key="top_k", run="sampling")) is not None
