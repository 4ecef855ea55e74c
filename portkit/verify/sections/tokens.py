"""verify's tokenizer section: the ids a candle program feeds, against the ids transformers feeds.

It runs before any forward. A built-in corpus (leading and repeated spaces, newlines and tabs,
digits, unicode and emoji, code, each of the model's special tokens inside text with and without
spaces around it, and the model's chat template rendered by transformers for a two-turn
conversation) is encoded with and without special tokens on both sides:

- candle: the `tokenizers` crate candle-core 0.11.0 depends on (`portkit_native.Tokenizer`, 0.22.2)
  on tokenizer.json, as a candle program does;
- transformers: `AutoTokenizer.from_pretrained` on the directory, as a transformers user does.

Differing ids are a MISMATCH (exit 1). Each tokenizer finding (PK5xx) is judged from the ids:
a finding whose rule declares an edit of tokenizer.json is CONFIRMED when that edit, applied to a
copy the crate loads (after the other findings' edits), removes differing encodes (decoded text
for PK504); PK507 is CRASH-CONFIRMED by the crate's own refusal; PK509 when both sides start the
rendered conversation with BOS twice.

`prompt_ids` gives the forward's prompt for `--text` / `--chat` and the default text:
transformers' ids (the forward runs on them on both sides, so the model comparison stays
meaningful) and the crate's own, shown beside them when they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portkit.findings import ExpectedCrash, Finding, TemplateEnvironments, TokenizerEdit
from portkit.verify.candle.native import crate_versions, native
from portkit.verify.corpus import CONVERSATION, Sample, section_corpus
from portkit.verify.errors import one_line
from portkit.verify.judge.confirm import confirm_static
from portkit.verify.judge.verdicts import Confirmation, fails_as_predicted, fewer, identity
from portkit.verify.reference.tokenizer import render_chat, transformers_tokenizer
from portkit.verify.sections.tokenize import crate_from_text, crate_tokenizer


@dataclass
class Encoded:
    """One text encoded on both sides, with or without special tokens."""

    sample: Sample
    special: bool
    crate: list[int]
    transformers: list[int]
    crate_pieces: list[str] = field(default_factory=list)
    transformers_pieces: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return self.crate != self.transformers

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.sample.text,
            "tags": list(self.sample.tags),
            "special_tokens": self.special,
            "candle": {"ids": self.crate, "pieces": self.crate_pieces},
            "transformers": {"ids": self.transformers, "pieces": self.transformers_pieces},
        }


@dataclass
class TokenizerSection:
    """What the tokenizer comparison found."""

    path: Path
    transformers_class: str | None = None
    crate_error: str | None = None  # the crate's own message when it cannot load tokenizer.json
    transformers_error: str | None = None
    encodes: list[Encoded] = field(default_factory=list)
    decodes: int = 0
    decode_differs: list[tuple[str, list[int], str, str]] = field(
        default_factory=list
    )  # (text, ids, candle, transformers)
    chat_text: str | None = None
    chat_note: str | None = None
    findings: list[Confirmation] = field(default_factory=list)
    forward_note: str | None = None  # set when the forward did not run (no weights)
    templates: Any = (
        None  # portkit.verify.sections.chat_templates.TemplateSection: the chat template in the Rust environments
    )

    @property
    def differing(self) -> list[Encoded]:
        return [e for e in self.encodes if e.differs]

    @property
    def first(self) -> Encoded | None:
        d = self.differing
        return d[0] if d else None

    @property
    def compared(self) -> bool:
        return self.crate_error is None and self.transformers_error is None

    @property
    def ok(self) -> bool:
        """No differing ids or decoded texts, a file the crate loads (a transformers failure
        compares nothing), and the chat template rendered alike in every Rust environment."""
        return (
            self.crate_error is None
            and not self.differing
            and not self.decode_differs
            and (self.templates is None or self.templates.ok)
        )

    def to_json(self) -> dict[str, Any]:
        first = self.first
        return {
            "tokenizer_json": str(self.path),
            "candle": f"tokenizers crate {crate_versions(native())['tokenizers']} (portkit_native), tokenizer.json as "
            "written",
            "transformers_class": self.transformers_class,
            "candle_error": self.crate_error,
            "transformers_error": self.transformers_error,
            "texts": len({e.sample.text for e in self.encodes}),
            "encodes": len(self.encodes),
            "differing": len(self.differing),
            "first_difference": first.to_json() if first else None,
            "decodes": self.decodes,
            "decodes_differing": len(self.decode_differs),
            "first_decode_difference": (
                dict(zip(("text", "ids", "candle", "transformers"), self.decode_differs[0], strict=False))
                if self.decode_differs
                else None
            ),
            "chat_text": self.chat_text,
            "chat_note": self.chat_note,
            "chat_template": self.templates.to_json() if self.templates is not None else None,
            "findings": [f.to_json() for f in self.findings],
            "forward": self.forward_note,
            "ok": self.ok,
        }


def encode_all(crate: Any, tok: Any, samples: list[Sample]) -> list[Encoded]:
    out = []
    for s in samples:
        for special in (True, False):
            ids, pieces = crate.encode_pieces(s.text, special)
            t_ids = list(tok.encode(s.text, add_special_tokens=special))
            out.append(Encoded(s, special, list(ids), t_ids, list(pieces), list(tok.convert_ids_to_tokens(t_ids))))
    return out


def _count(crate: Any, encodes: list[Encoded], only: Sequence[int] | None = None) -> int:
    """How many encodes `crate` gives other ids than transformers for; with `only`, how many
    place those ids (special tokens) differently: a normalized special token changes where the
    token is found before it changes whether the whole text agrees."""
    if only is None:
        return sum(list(crate.encode(e.sample.text, e.special)) != e.transformers for e in encodes)
    keep = set(only)

    def pick(ids: Sequence[int]) -> list[int]:
        return [i for i in ids if i in keep]

    return sum(pick(crate.encode(e.sample.text, e.special)) != pick(e.transformers) for e in encodes)


def _skipped_decode_diffs(crate: Any, tok: Any, encodes: list[Encoded]) -> tuple[int, int]:
    """transformers' ids with special tokens decoded on both sides skipping them (candle-examples'
    `TokenOutputStream` decodes so): (texts decoded, texts that differ)."""
    ids = [e.transformers for e in encodes if e.special]
    return len(ids), sum(
        crate.decode(i, skip_special_tokens=True) != tok.decode(i, skip_special_tokens=True) for i in ids
    )


def _decode_diffs(crate: Any, tok: Any, encodes: list[Encoded]) -> tuple[int, list[tuple[str, list[int], str, str]]]:
    """transformers' ids (without special tokens) decoded on both sides."""
    n, out = 0, []
    for e in encodes:
        if e.special:
            continue
        n += 1
        a = crate.decode(e.transformers)
        b = tok.decode(e.transformers, skip_special_tokens=False)
        if a != b:
            out.append((e.sample.text, e.transformers, a, b))
    return n, out


# --------------------------------------------------------------------------- the findings


def _patched(tj: Any, patch: dict[str, Any]) -> Any:
    from portkit.model.tokenizer_edit import apply_changes, probe_changes

    return crate_from_text(apply_changes(tj, probe_changes(patch)))


def _confirm(findings: Sequence[Finding], sec: TokenizerSection, crate: Any, tok: Any, tj: Any) -> list[Confirmation]:
    """Each tokenizer finding's verdict: an expected crash by the crate's refusal, an edit by the
    encodes (or decodes) it changes, after the other findings' edits."""
    edits = {id(f): f.probe.edit for f in findings if isinstance(f.probe, TokenizerEdit) and f.probe.edit}
    out = []
    for f in findings:
        p = f.probe
        if isinstance(p, ExpectedCrash):
            out.append(_confirm_refusal(f, p, sec))
        elif not isinstance(p, TokenizerEdit):
            out.append(confirm_static(f))
        elif not sec.compared:
            why = sec.crate_error or sec.transformers_error
            out.append(Confirmation(**identity(f, p.kind), verdict="NOT-REPRODUCED", evidence=f"not measurable: {why}"))
        elif p.measure == "double-bos":
            out.append(_confirm_double_bos(identity(f, p.kind), sec, tok))
        elif not p.edit:
            out.append(confirm_static(f))
        else:
            others: dict[str, Any] = {}
            for g in findings:
                if g is not f and id(g) in edits:
                    others.update(edits[id(g)])
            out.append(_confirm_edit(f, p, p.edit, others, sec, crate, tok, tj))
    return out


def _confirm_refusal(f: Finding, p: ExpectedCrash, sec: TokenizerSection) -> Confirmation:
    base = identity(f, p.kind)
    if sec.crate_error is None:
        return Confirmation(**base, verdict="NOT-REPRODUCED", evidence="the tokenizers crate loads tokenizer.json")
    if not fails_as_predicted(p.expect, sec.crate_error):
        return Confirmation(
            **base,
            verdict="NOT-REPRODUCED",
            evidence=f"the crate refuses the file, but not as predicted: {sec.crate_error}",
        )
    return Confirmation(
        **base,
        verdict="CRASH-CONFIRMED",
        evidence=f"the tokenizers crate: {sec.crate_error}",
        details={"expect": p.expect},
    )


def _confirm_edit(
    f: Finding,
    p: TokenizerEdit,
    patch: dict[str, Any],
    others: dict[str, Any],
    sec: TokenizerSection,
    crate: Any,
    tok: Any,
    tj: Any,
) -> Confirmation:
    """`patch` applied after the other findings' edits (`others`) must leave fewer differing
    encodes (or decodes, or special-token placements: `p.measure`) than the others alone."""
    base = identity(f, p.kind)
    try:
        before_tok = _patched(tj, others) if others else crate
        after_tok = _patched(tj, {**others, **patch})
    except Exception as e:  # noqa: BLE001 - the edited copy is refused: say so, verdict stays honest
        return Confirmation(
            **base, verdict="NOT-REPRODUCED", evidence=f"its edit could not be applied: {one_line(e, 200)}"
        )
    measure = p.measure
    prefix = "with the other findings' edits, " if others else ""
    only = None
    if measure == "special-placement":  # where the special tokens it names are found
        only = [i for c in p.special_tokens for i in [tok.convert_tokens_to_ids(c)] if isinstance(i, int)]

    def count(t: Any) -> int:
        if measure == "decodes":
            return len(_decode_diffs(t, tok, sec.encodes)[1])
        if measure == "skipped-decodes":
            return _skipped_decode_diffs(t, tok, sec.encodes)[1]
        return _count(t, sec.encodes, only)

    if measure == "decodes":
        what, total = "decoded texts differ", sec.decodes
    elif measure == "skipped-decodes":
        what, total = "texts decoded skipping special tokens differ", _skipped_decode_diffs(crate, tok, sec.encodes)[0]
    else:
        what = "encodes differ" if only is None else "encodes place its special tokens differently"
        total = len(sec.encodes)
    b, a = count(before_tok), count(after_tok)
    details = {"before": b, "after": a, "of": total, "patch": patch}
    edit = ", ".join(sorted(patch))
    if fewer(b, a):
        evidence = f"{prefix}{b} of {total} {what}; with its edit ({edit}), {a}"
        return Confirmation(**base, verdict="CONFIRMED", evidence=evidence, details=details)
    if others:
        # no effect once the others are fixed (its effect may go through theirs: a normalized
        # special token matters only under the normalizer): measure it on the file as written
        b0 = len(sec.decode_differs) if measure == "decodes" else count(crate)
        a0 = count(_patched(tj, patch))
        details.update(as_written=b0, alone=a0)
        if fewer(b0, a0):
            evidence = (
                f"on tokenizer.json as written {b0} of {total} {what}, with its edit alone ({edit}) {a0}; "
                "with the other findings' edits it has no effect of its own"
            )
            return Confirmation(**base, verdict="CONFIRMED", evidence=evidence, details=details)
    evidence = f"no effect of its own on the corpus: {prefix}{b} of {total} {what}, and {a} with its edit"
    return Confirmation(**base, verdict="NOT-REPRODUCED", evidence=evidence, details=details)


def _confirm_double_bos(base: dict[str, Any], sec: TokenizerSection, tok: Any) -> Confirmation:
    chat = next((e for e in sec.encodes if "chat" in e.sample.tags and e.special), None)
    bos = getattr(tok, "bos_token_id", None)
    if chat is None or bos is None:
        return Confirmation(
            **base, verdict="NOT-REPRODUCED", evidence=f"not measurable: {sec.chat_note or 'no BOS token'}"
        )
    double = chat.crate[:2] == [bos, bos] and chat.transformers[:2] == [bos, bos]
    evidence = (
        f"the rendered conversation encoded with special tokens: candle {chat.crate[:4]}..., transformers "
        f"{chat.transformers[:4]}..."
    )
    return Confirmation(
        **base,
        verdict="CONFIRMED" if double else "NOT-REPRODUCED",
        evidence=("BOS twice on both sides: " if double else "no double BOS: ") + evidence,
    )


# --------------------------------------------------------------------------- the section


def preload_crate(root: Path) -> tuple[Any, str | None] | None:
    """`crate_tokenizer` on root's tokenizer.json (None without one), for `tokenizer_section`'s
    `preloaded`: the crate's parse of the file (0.06-0.08 s for a 2 MB tokenizer.json) done while
    verify waits for transformers, not after."""
    path = root / "tokenizer.json"
    return crate_tokenizer(path) if path.is_file() else None


def tokenizer_section(
    root: Path,
    findings: Sequence[Finding],
    progress: Callable[[str], None] = lambda _s: None,
    *,
    transformers: Callable[[], tuple[Any, str | None]] | None = None,
    preloaded: tuple[Any, str | None] | None = None,
) -> TokenizerSection | None:
    """The section for `root`, or None when it has no tokenizer.json.

    `transformers`: gives
    (transformers' tokenizer, None) or (None, why) (verify's is `portkit.verify.reference.tokenizer`'s
    record from the reference's process); by default it is loaded here. `preloaded`: the crate's
    tokenizer as `crate_tokenizer` gave it, loaded earlier (verify loads it while transformers
    computes); by default it is loaded here."""
    path = root / "tokenizer.json"
    if not path.is_file():
        return None
    tok_findings = [f for f in findings if f.probe is not None and f.probe.run == "tokens"]
    sec = TokenizerSection(path=path)
    progress("tokenizer: the tokenizers crate and transformers")
    crate, sec.crate_error = preloaded if preloaded is not None else crate_tokenizer(path)
    tok, sec.transformers_error = transformers() if transformers is not None else transformers_tokenizer(root)
    if tok is not None:
        sec.transformers_class = getattr(tok, "class_name", None) or type(tok).__name__
        sec.chat_text, sec.chat_note = render_chat(tok, CONVERSATION)
    if crate is not None and tok is not None:
        sec.encodes = encode_all(crate, tok, section_corpus(tok, root, sec.chat_text))
        sec.decodes, sec.decode_differs = _decode_diffs(crate, tok, sec.encodes)
    tj = None
    if any(isinstance(f.probe, TokenizerEdit) and f.probe.edit for f in tok_findings):
        from portkit.model.tokenizer_files import read_tokenizer_json

        tj = read_tokenizer_json(path)
    progress("tokenizer: confirming the findings")
    template_findings = [f for f in tok_findings if isinstance(f.probe, TemplateEnvironments)]
    sec.findings = _confirm([f for f in tok_findings if f not in template_findings], sec, crate, tok, tj)
    if tok is not None:
        from portkit.verify.sections.chat_templates import template_section

        sec.templates = template_section(root, tok, crate, template_findings, progress)
    sec.findings += sec.templates.findings if sec.templates is not None else _not_rendered(template_findings, sec)
    return sec


def _not_rendered(findings: Sequence[Finding], sec: TokenizerSection) -> list[Confirmation]:
    why = sec.transformers_error or "transformers has no chat template"
    return [
        Confirmation(
            code=f.code,
            name=f.name,
            severity=f.severity,
            message=f.message,
            filename=f.filename,
            probe_kind="template",
            verdict="NOT-REPRODUCED",
            evidence=f"not measurable: {why}",
        )
        for f in findings
    ]


def has_tokenizer(root: Path) -> bool:
    return (root / "tokenizer.json").is_file()


# --------------------------------------------------------------------------- text report


# --------------------------------------------------------------------------- where generate() stops


def generation_stop(root: Path) -> tuple[list[int], str] | None:
    """The ids `generate()` stops on: generation_config.json's `eos_token_id`, else config.json's."""
    from portkit.semantics.transformers import eos_ids
    from portkit.verify.model_dir import json_beside

    for name in ("generation_config.json", "config.json"):
        doc = json_beside(root, name)
        if "eos_token_id" in doc:
            ids = eos_ids(doc["eos_token_id"])
            return (ids, name) if ids else None
    return None


def _stop_index(greedy: Sequence[int], stop: tuple[list[int], str] | None) -> int | None:
    if stop is None:
        return None
    return next((k for k, t in enumerate(greedy) if t in stop[0]), None)


def stop_greedy(cmp: Any, reference: Any, run: Any, stop: tuple[list[int], str] | None, tol: Any) -> Any:
    """The greedy comparison cut where `generate()` stops: at the first of the stop ids the
    reference generates (included). What candle generates after it, a transformers user never sees."""
    from portkit.verify.judge.checks import compare_greedy

    k = _stop_index(reference.greedy, stop)
    if k is None or cmp is None or run.greedy is None:
        return cmp
    cmp.greedy = compare_greedy(
        reference.greedy[: k + 1],
        run.greedy[: k + 1],
        step_rows=reference.rows,
        near_tie=tol.near_tie,
        ref_complete=True,
    )
    return cmp


def stop_description(reference: Any, stop: tuple[list[int], str] | None) -> dict[str, Any] | None:
    if stop is None:
        return None
    k = _stop_index(reference.greedy, stop)
    return {
        "eos_token_ids": stop[0],
        "source": stop[1],
        "stopped_at": k,
        "token": reference.greedy[k] if k is not None else None,
    }
