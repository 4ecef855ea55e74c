"""portkit.rules.tokenizer: one rule per module, the shared analysis computed once per lint
context (and held by a typed memo, not under private keys of the context's `__dict__`)."""

from __future__ import annotations

import gc
import importlib
import inspect
import weakref
from pathlib import Path

from fixtures.tokenizer_shapes import write_tokenizer
from portkit.model import load_model
from portkit.rules import RULES, Context, Rule
from portkit.rules import tokenizer as T
from portkit.rules.tokenizer import analysis as A
from portkit.target import Target

PACKAGE = Path(T.__file__).parent
SHARED = {"__init__", "analysis", "base"}


def test_each_rule_module_holds_one_rule_named_as_the_module() -> None:
    seen = []
    for p in sorted(PACKAGE.glob("*.py")):
        if p.stem in SHARED:
            continue
        mod = importlib.import_module(f"portkit.rules.tokenizer.{p.stem}")
        rules = [
            c
            for _, c in inspect.getmembers(mod, inspect.isclass)
            if issubclass(c, Rule) and c.__module__ == mod.__name__
        ]
        assert len(rules) == 1, (p.name, rules)
        assert rules[0].name.replace("-", "_") == p.stem
        assert mod.__doc__ is not None and mod.__doc__.startswith(f"{rules[0].code} {rules[0].name}: ")
        seen.append(rules[0])
    assert sorted(seen, key=lambda c: c.code) == sorted(T.RULES, key=lambda c: c.code)
    assert [c.code for c in T.RULES] == [f"PK5{n:02d}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)] + ["PK511"] + [
        f"PK5{n}" for n in range(12, 20)
    ]
    assert {c for c, r in RULES.items() if r.group == "tokenizer"} == {c.code for c in T.RULES}


def test_the_analysis_is_computed_once_per_context_and_kept_off_its_dict(tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "m", "llama2", "trigger")
    ctx = Context(load_model(d), Target())
    before = dict(vars(ctx))
    found = [f for r in RULES.values() if r.group == "tokenizer" for f in r.check(ctx)]
    assert {f.code for f in found} >= {"PK501", "PK502", "PK505"}
    assert A.analysis(ctx) is A.analysis(ctx) and A.memo(ctx).analysis is A.analysis(ctx)
    assert A.chat_template_text(ctx) is A.chat_template_text(ctx)
    assert set(vars(ctx)) - set(before) <= {"family", "fv", "ftv", "ggufs"}  # Context's own cached properties only
    other = Context(ctx.facts, Target())
    assert A.analysis(other) is not A.analysis(ctx)  # one memo per context, not per directory


def test_the_memo_goes_with_its_context(tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "m", "smollm", "trigger")
    ctx = Context(load_model(d), Target())
    A.analysis(ctx)
    ref = weakref.ref(ctx)
    n = len(A._MEMOS)
    del ctx
    gc.collect()
    assert ref() is None and len(A._MEMOS) == n - 1


def test_no_rule_keeps_state_in_a_contexts_dict() -> None:
    root = Path(__file__).resolve().parents[2] / "portkit" / "rules"
    assert [str(p) for p in root.rglob("*.py") if "ctx.__dict__" in p.read_text(encoding="utf-8")] == []


def test_chat_template_text_is_none_without_tokenizer_files(tmp_path: Path) -> None:
    from fixtures import skeleton as sk

    d = sk.write_model(tmp_path / "m", sk.config("tf4"), weights=False)
    ctx = Context(load_model(d), Target())
    assert A.chat_template_text(ctx) is None and A.analysis(ctx).crate is None
