"""`portkit fix` for tokenizer.json: write into it what transformers 5 builds, so that the
tokenizers crate a candle program uses gives transformers' ids.

One `FixPlan` for the directory's tokenizer.json (`portkit.fix.plans` lists it after
config.json's), one `Edit` per tokenizer finding (PK5xx), each safe or refused. Each rule says
what its finding's edit is (`TokenizerRule.tokenizer_changes`, `portkit.rules.tokenizer`) and,
when there is none, why (`TokenizerRule.refusal`); this module knows no rule by its code. Today:

- safe: PK501-PK504 and PK511 write the normalizer, pre-tokenizer, decoder and post-processor
  the class transformers picks builds; PK505 sets `normalized` to false on the special tokens it
  names; PK506 sets `padding` and `truncation` to null.
- refused, with the reason: PK507 (the crate cannot load the file; no edit portkit can make
  fixes that), and the findings about other files or about how a program generates (PK508 eos
  ids, PK509 a template's BOS, PK510 sampling defaults): no tokenizer.json edit fixes them.

Every other byte of the file is kept: each edit replaces one value in the text (a top-level
key's, or one added token's), rendered in the file's own layout, so the 10 MB of vocabulary and
merges, the key order and the formatting do not move. Before it is offered, a plan is checked:
transformers must pick the same class and build the same pipeline from the edited files, the
crate must still load the file (as lint predicts), and no fixable tokenizer rule may fire on it.
`portkit verify` then proves the result on its corpus: the ids are equal.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from portkit.errors import InputError
from portkit.fixplan import Edit, FixPlan
from portkit.model import ModelFacts, load_model
from portkit.model.tokenizer_edit import apply_changes
from portkit.model.tokenizer_files import parse_tokenizer_json
from portkit.rules import RULES, Context
from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import TokenizerRule
from portkit.semantics import tokenizer as S
from portkit.target import Target


def findings(facts: ModelFacts) -> tuple[list[Any], Context]:
    """The tokenizer rules' findings on `facts`, and the lint context they were found in."""
    ctx = Context(facts, Target())
    return [f for rule in RULES.values() if rule.group == "tokenizer" for f in rule.check(ctx)], ctx


def edit(finding: Any, ctx: Context) -> Edit:
    """The finding's edit: what its rule writes into tokenizer.json (`tokenizer_changes`), else
    refused with the rule's reason (`refusal`)."""
    rule = RULES[finding.code]
    assert isinstance(rule, TokenizerRule), finding.code
    changes = rule.tokenizer_changes(finding, ctx)
    return Edit(finding, changes) if changes is not None else Edit(finding, refused=rule.refusal(finding))


def plan(model_dir: Path, facts: ModelFacts | None = None) -> FixPlan | None:
    """tokenizer.json's plan, or None when the directory has none."""
    facts = facts or load_model(model_dir)
    tok = facts.tokenizer
    if tok is None or tok.tokenizer is None:
        return None
    tj = tok.tokenizer
    found, ctx = findings(facts)
    p = FixPlan(path=tj.path, old_text=tj.text)
    p.edits = [edit(f, ctx) for f in found]
    changes = p.changes
    if changes:
        new_text = apply_changes(tj, changes)
        _check(facts, ctx, new_text)
        p.new_text = new_text
    return p


# --------------------------------------------------------------------------- checking the result


def edited_facts(facts: ModelFacts, new_text: str) -> ModelFacts:
    """The directory as it reads with tokenizer.json replaced by `new_text`."""
    tok = facts.tokenizer
    assert tok is not None and tok.tokenizer is not None
    new_tj = parse_tokenizer_json(tok.tokenizer.path, new_text)
    return dataclasses.replace(facts, tokenizer=dataclasses.replace(tok, tokenizer=new_tj))


def _check(facts: ModelFacts, ctx: Context, new_text: str) -> None:
    tok = facts.tokenizer
    assert tok is not None and tok.tokenizer is not None, "fix edits a tokenizer.json it read"
    path = tok.tokenizer.path
    new_facts = edited_facts(facts, new_text)
    after_found, after_ctx = findings(new_facts)
    before, after = analysis(ctx), analysis(after_ctx)
    assert before.transformers is not None and after.transformers is not None and after.crate is not None
    if after.crate.refused is not None:
        raise InputError(path, f"refusing to fix: the crate would refuse the edited file ({after.crate.refused})")
    if before.transformers.choice.name != after.transformers.choice.name:
        raise InputError(
            path,
            f"refusing to fix: transformers would pick `{after.transformers.choice.name}` instead of "
            f"`{before.transformers.choice.name}` for the edited file",
        )
    for part in ("normalizer", "pre_tokenizer", "decoder", "post_processor"):
        b = getattr(before.transformers, part)(before.crate)
        c = getattr(after.transformers, part)(after.crate)
        if S.canonical(b) != S.canonical(c):
            raise InputError(path, f"refusing to fix: the edit would change the {part} transformers builds")
    left = sorted({f.code for f in after_found if edit(f, after_ctx).refused is None})
    if left:
        raise InputError(path, f"refusing to fix: {', '.join(left)} would still fire after the edit")
