"""`portkit fix`: rewrite config.json so candle reads what transformers 5 reads.

Like ruff's `--fix`: every safe edit is applied, every finding no edit can fix is reported with
its reason, and the exit code is 1 while findings remain.

The API (one plan per file; `FixPlan` and `Edit` live in portkit.fixplan, so that
tokenizer.json's fixer, portkit.tokenizer_fix, returns the same shape from a layer below):

- `plans(model_dir) -> list[FixPlan]`: what fix would do to each file of the model.
- `FixPlan`: `path`, `old_text`, `new_text` (None when nothing changes) and `edits`, a list of
  `Edit`s, one per finding: **safe** (`changes`: the keys it sets, applied to `new_text`) or
  **refused** (`refused`: why no edit of this file makes candle compute what transformers
  does; the finding remains). `diff()` is exactly `old_text` -> `new_text`, what `write()`
  writes; `fixed` and `remaining` list the findings of each kind.
- `write(plan)` replaces the file atomically.

What it writes in config.json: the top-level `rope_theta` transformers uses (PK101), llama3
scaling as a top-level `rope_scaling` in candle's `Llama3RopeConfig` shape (PK102, PK103),
transformers' value for a key the family's candle module requires (PK110: `rope_theta`,
gemma3's `rope_local_base_freq`, stablelm's `partial_rotary_factor`, qwen3_moe's
`num_experts`, ...), qwen2's null `sliding_window` as `max_position_embeddings` (PK112),
gemma's activation names (PK116, PK117). Every other key, and the key order, is kept; new keys
go right after `rope_parameters` (or at the end). Weights are never touched.

What remains (refused, with the finding's help as the reason): every config finding (PK1xx)
without an edit: head_dim, biases, activation, partial rotary, sliding window, non-llama3
scaling (linear, dynamic, yarn, longrope), values candle's serde refuses, and facts about other
files (generation_config.json's EOS ids) or about how the model is fed. The safe edits are
written all the same: each one makes the config closer to what transformers computes, and
what is left is listed.

A finding that candle's serde hid behind another (it stops at its first error) is found by
linting the edited config again, until nothing new fires. Every plan is checked before it is
offered: transformers' effective values must be unchanged and the fixable rules must be clean
on the result (else exit 2: fix writes nothing it cannot check).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

from portkit import atomicfile
from portkit.errors import InputError
from portkit.fixplan import Edit, FixPlan
from portkit.model import JsonDoc, ModelFacts, load_model
from portkit.model.jsonfile import key_positions, parse_json_text
from portkit.rules import RULES, Context
from portkit.semantics import FamilyTransformersView, family_transformers_view
from portkit.target import Target

# where a rule's edits come from doesn't matter to transformers: only effective values do
_PROVENANCE = {"family", "values", "sources", "rope_source"}


def effective(ftv: FamilyTransformersView) -> dict[str, Any]:
    """transformers' effective values, each under its own name (so a refusal names what would
    change), without where each came from."""
    out = dict(ftv.values)
    out.update({k: v for k, v in dataclasses.asdict(ftv).items() if k not in _PROVENANCE})
    # transformers keeps a legacy `type` inside rope_parameters, but reads it only as the
    # default for `rope_type`, which is compared on its own: rewriting llama3 scaling
    # without `type` changes nothing transformers computes.
    for key in ("rope_parameters", "local_rope_parameters"):
        out[key] = {k: v for k, v in out[key].items() if k != "type"}
    return out


def _indent(text: str) -> int | str:
    m = re.search(r"\n([ \t]+)\"", text)
    if not m:
        return 2
    ws = m.group(1)
    return "\t" if ws.startswith("\t") else len(ws)


def render(obj: dict[str, Any], like: str) -> str:
    ind = _indent(like)
    out = json.dumps(obj, indent=ind, ensure_ascii=False)
    if like.endswith("\n"):
        out += "\n"
    return out


def apply_edits(config: dict[str, Any], edits: dict[str, Any]) -> dict[str, Any]:
    """Replace keys in place; insert new ones after `rope_parameters` (else at the end)."""
    new = {k: edits.get(k, v) for k, v in config.items()}
    missing = [k for k in edits if k not in config]
    if not missing:
        return new
    anchor = "rope_parameters" if "rope_parameters" in new else None
    out: dict[str, Any] = {}
    for k, v in new.items():
        out[k] = v
        if k == anchor:
            for m in missing:
                out[m] = edits[m]
    for m in missing:
        out.setdefault(m, edits[m])
    return out


def plans(model_dir: Path, facts: ModelFacts | None = None) -> list[FixPlan]:
    """What fix does to each file of the model: config.json, and tokenizer.json
    (portkit.tokenizer_fix) when the directory has one."""
    from portkit import tokenizer_fix

    facts = facts or load_model(model_dir)
    out = [plan(model_dir, facts)] if facts.config is not None or facts.tokenizer is None else []
    tok = tokenizer_fix.plan(model_dir, facts)
    if tok is not None:
        out.append(tok)
    return out


def plan(model_dir: Path, facts: ModelFacts | None = None) -> FixPlan:
    """config.json's plan: every config rule's finding, each a safe edit or refused."""
    from portkit.lint import check_usable

    facts = facts or load_model(model_dir)
    doc = facts.config
    if doc is None:
        raise InputError(model_dir, "no config.json to fix")
    ctx = Context(facts, Target())
    check_usable(facts, ctx)
    p = FixPlan(path=doc.path, old_text=doc.text)
    if doc.duplicates:
        dup = ".".join(doc.duplicates[0])
        raise InputError(
            doc.path,
            f"key `{dup}` is written twice; fix it by hand first (transformers keeps the last, candle refuses)",
        )
    assert isinstance(doc.value, dict)
    new_obj, new_text = doc.value, doc.text
    fixed_codes: set[str] = set()
    safe: list[Edit] = []
    # candle's serde stops at its first error, so a finding can hide behind another (PK110's
    # missing rms_norm_eps behind PK103) until that one is fixed: lint the edited config again
    # until nothing new fires. Each round fixes at least one more code, so this ends.
    while True:
        round_ctx = ctx if new_text == doc.text else Context(_edited(facts, doc, new_text), Target())
        findings = [
            f
            for rule in RULES.values()
            if rule.group == "config" and round_ctx.applies(rule)
            for f in rule.check(round_ctx)
        ]
        fresh = [f for f in findings if f.fix is not None and f.code not in fixed_codes]
        fixed_codes.update(f.code for f in fresh)
        safe += [Edit(f, dict(f.fix.edits)) for f in fresh if f.fix is not None]
        if not fresh:
            break
        new_obj = apply_edits(doc.value, {k: v for e in safe for k, v in e.changes.items()})
        new_text = render(new_obj, doc.text)
    # what is left is what the edited config still shows: no edit for it
    p.edits = safe + [
        Edit(f, refused=f.help or f"no edit of {doc.path.name} fixes {f.code}") for f in findings if f.fix is None
    ]
    if safe:
        _check(facts, doc, new_obj, new_text)
        p.new_text = new_text
    return p


def _edited(facts: ModelFacts, doc: JsonDoc, new_text: str) -> ModelFacts:
    """The model as it would read with config.json replaced by `new_text`."""
    value, dups = parse_json_text(new_text)
    new_doc = JsonDoc(path=doc.path, value=value, text=new_text, positions=key_positions(new_text), duplicates=dups)
    return ModelFacts(root=facts.root, config=new_doc, generation_config=facts.generation_config)


def _effective(facts: ModelFacts, config: Any, gen: dict[str, Any] | None) -> dict[str, Any]:
    """transformers' effective values: the family's view under candle's names."""
    from portkit.families import detect_or_default

    family = detect_or_default(config)
    return effective(family_transformers_view(family.name if family is not None else None, config, gen))


def _check(facts: ModelFacts, doc: JsonDoc, new_obj: dict[str, Any], new_text: str) -> None:
    gen = facts.generation_config.value if facts.generation_config else None
    gen = gen if isinstance(gen, dict) else None
    before, after = _effective(facts, doc.value, gen), _effective(facts, new_obj, gen)
    if before != after:
        changed = sorted(k for k in before if before[k] != after.get(k))
        raise InputError(
            doc.path, f"refusing to fix: the edit would change transformers' effective {', '.join(changed)}"
        )
    ctx = Context(_edited(facts, doc, new_text), Target())
    left = [
        f.code
        for rule in RULES.values()
        if rule.group == "config" and ctx.applies(rule)
        for f in rule.check(ctx)
        if f.fix is not None
    ]
    if left:
        raise InputError(doc.path, f"refusing to fix: {', '.join(sorted(set(left)))} would still fire after the edit")


def write(p: FixPlan) -> None:
    """Replace the plan's file (config.json or tokenizer.json) atomically and durably
    (`portkit.atomicfile`: fsynced before the rename, nothing left when killed). A symlinked file
    becomes a regular file, so a shared Hugging Face cache blob is never modified. InputError
    when the directory cannot be written."""
    assert p.new_text is not None
    try:
        mode = os.stat(p.path).st_mode & 0o777
    except OSError:
        mode = 0o644
    try:
        atomicfile.replace(p.path, p.new_text.encode("utf-8"), mode=mode)
    except OSError as e:
        what = "config" if p.path.name == "config.json" else p.path.name
        raise InputError(p.path, f"cannot write the fixed {what}: {e.strerror or e}") from None


def sweep(model_dir: Path) -> None:
    """Remove what a killed `fix --write` left in `model_dir` (its temporary config.json or tokenizer.json)."""
    atomicfile.sweep(model_dir, "config.json")
    atomicfile.sweep(model_dir, "tokenizer.json")
