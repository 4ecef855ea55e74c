"""A lint finding, in the shape users of ruff's JSON output already parse.

`code, name, message, fix, filename, location{row,column}, severity, url`, plus what portkit
knows that ruff does not: the effective value on each side (`transformers_value`,
`candle_value`) and the `probe` that `portkit verify` runs to confirm the finding on candle
itself (a numeric counterfactual, an expected crash, or nothing: static-only).

Frozen stdlib dataclasses, not pydantic models: `portkit lint` runs as a pre-commit hook, and
importing pydantic and building these models cost more than the whole lint of an 8B
checkpoint. The JSON shape is still described and enforced: `portkit.schemas.lint_report()`
generates `schemas/lint-report.schema.json` from these classes (pydantic, imported only
there), and tests validate real `--format json` output against it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

Severity = Literal["error", "warning", "info"]
ProbeKind = Literal["numeric", "crash", "static-only", "tokens", "template", "sampling"]
#: The run of `portkit verify` a probe needs: "prompt" (the one every verify makes), "tokens" (the
#: tokens section: both tokenizers' ids, no forward), "turns" (a continuation on the warm KV
#: cache), "batch" (rows in one forward), "padded-batch" (the same rows with a padding mask) or
#: "embedding" (an embedding model's run: its padded batch and the counterfactuals its probes name,
#: `CandleProgram` and `ReferenceEdit`).
ProbeRun = Literal["prompt", "tokens", "turns", "batch", "padded-batch", "embedding", "sampling"]
#: What a probe's confirmer counts, where its run measures more than one thing (None: the run's
#: usual measure, the ids a tokens probe's edit changes, the counterfactual a numeric probe runs):
#: "decodes" (texts the crate decodes otherwise), "skipped-decodes" (texts with special tokens the crate decodes
#: otherwise when it skips them), "special-placement" (encodes that place the
#: special tokens its edit names otherwise), "double-bos" (a rendered conversation that starts with
#: two BOS), "saved-padding" (the padding the crate applies from tokenizer.json, on an embedding
#: run), "non-finite" (every embedding NaN or inf).
ProbeMeasure = Literal["decodes", "skipped-decodes", "special-placement", "double-bos", "saved-padding", "non-finite"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    row: int
    column: int

    def to_json(self) -> dict[str, Any]:
        return {"row": self.row, "column": self.column}


@dataclass(frozen=True, slots=True, kw_only=True)
class Fix:
    """`portkit fix` can rewrite config.json or tokenizer.json so candle reads it as transformers does."""

    applicability: Literal["safe"] = "safe"
    message: str
    edits: dict[str, Any] = field(default_factory=dict)  # top-level keys of the finding's file `portkit fix` writes

    def to_json(self) -> dict[str, Any]:
        return {"applicability": self.applicability, "message": self.message, "edits": json_value(self.edits)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """How `portkit verify` confirms a finding on the real runtimes: one subclass per kind of
    probe, each with the fields its confirmer reads and exactly one confirmer on each run that
    reads it (`portkit.verify.judge.registry`: a crash on the prompt is chained with the other
    crashes, on a tokens run it is the crate's refusal), the way ruff maps each violation to one
    checker.

    What every probe has: the rule's code (`id`), the verify run it needs (`run`, set from the
    rule when the finding is made, so verify never looks the rule up again by code) and, where
    that run measures several things, which one its confirmer counts (`measure`).

    The lint JSON keeps one shape for every kind (`to_json`: kind, id, patch, expect,
    as_candle; schemas/lint-report.schema.json): each subclass says what it shows there.
    """

    kind: ClassVar[ProbeKind]  # the tag the lint JSON carries
    id: str
    run: ProbeRun = "prompt"
    measure: ProbeMeasure | None = None

    @property
    def on_path(self) -> bool:
        """A second turn's or a batch's run judges it (`portkit.verify.sections.paths`)."""
        return self.run in ("turns", "batch", "padded-batch")

    def shown_patch(self) -> dict[str, Any] | None:
        """What the lint JSON shows as `patch` (never read by verify)."""
        return None

    def shown_expect(self) -> str | None:
        return None

    def shown_as_candle(self) -> dict[str, Any] | None:
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "patch": json_value(self.shown_patch()),
            "expect": self.shown_expect(),
            "as_candle": json_value(self.shown_as_candle()),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class NotProbed(Probe):
    """Nothing to run: a fact about the files, not about computed numbers. verify reports it
    NOT-PROBED with `reason` (never NOT-REPRODUCED: nothing ran)."""

    kind: ClassVar[ProbeKind] = "static-only"
    reason: str  # the rule's `not_probed`


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedCrash(Probe):
    """candle must fail (load error or panic) with `expect` in its message (any failure where
    `expect` is None). `repair`: what repairs it for the next crash's probe (the rule's own
    patch, else its fix's edits); `at_load`: the rule predicts a failure at load, so a later
    failure shows it did not happen."""

    kind: ClassVar[ProbeKind] = "crash"
    expect: str | None = None
    repair: dict[str, Any] | None = None
    at_load: bool = False
    declared: dict[str, Any] | None = None  # the rule's own patch, as the lint JSON shows it

    def shown_patch(self) -> dict[str, Any] | None:
        return self.declared

    def shown_expect(self) -> str | None:
        return self.expect


@dataclass(frozen=True, slots=True, kw_only=True)
class CandleEdit(Probe):
    """A numeric counterfactual: candle runs the file it reads as written and with `edit`
    applied (config.json keys, or a GGUF's metadata keys), both against transformers; confirmed
    when only the edited run agrees.

    `as_candle`: how transformers must run to compute what candle computes, for a behaviour
    candle hard-codes (an activation, a rope base, a bias it never reads), which no edit on
    candle's side undoes: `{"what": "SiLU in the MLP", "config": {key: value}, "tensors": {name:
    "zero"}}`. `config` edits config.json (a dotted key reaches into a nested object,
    `rope_parameters.rope_theta`; None removes the key); `tensors` changes checkpoint tensors as
    the reference loads them. verify runs the reference so, and the finding is confirmed when
    candle agrees with it where it does not agree with transformers as written."""

    kind: ClassVar[ProbeKind] = "numeric"
    edit: dict[str, Any] | None = None  # the rule's own patch, else its fix's edits
    as_candle: dict[str, Any] | None = None
    declared: dict[str, Any] | None = None  # the rule's own patch, as the lint JSON shows it

    def shown_patch(self) -> dict[str, Any] | None:
        return self.declared

    def shown_as_candle(self) -> dict[str, Any] | None:
        return self.as_candle


@dataclass(frozen=True, slots=True, kw_only=True)
class CandleProgram(Probe):
    """An embedding model's counterfactual on candle's side: the same checkpoint run by another
    program (`portkit.verify.embedding.candle`: "no-mask", "pool-over-pads", ...), which must
    agree with the reference where the program as the user runs it does not."""

    kind: ClassVar[ProbeKind] = "numeric"
    program: str

    def shown_patch(self) -> dict[str, Any] | None:
        return {"program": self.program}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceEdit(Probe):
    """An embedding model's counterfactual on transformers' side: the reference run with
    `config` edited (what candle hard-codes), which candle must agree with."""

    kind: ClassVar[ProbeKind] = "numeric"
    config: dict[str, Any]

    def shown_patch(self) -> dict[str, Any] | None:
        return {"reference": self.config}


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenizerEdit(Probe):
    """Encode verify's corpus with the tokenizers crate (tokenizer.json as written, and with
    `edit` applied: `portkit.model.tokenizer_edit` keys) and with transformers; confirmed when
    the edit removes differing ids. `expect`: the texts it changes, in words."""

    kind: ClassVar[ProbeKind] = "tokens"
    edit: dict[str, Any] | None = None
    expect: str | None = None

    @property
    def special_tokens(self) -> tuple[str, ...]:
        """The special tokens whose `normalized` flag the edit clears."""
        return tuple((self.edit or {}).get("normalized_false", ()))

    def shown_patch(self) -> dict[str, Any] | None:
        return self.edit

    def shown_expect(self) -> str | None:
        return self.expect


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateEnvironments(Probe):
    """Render the chat template through the Rust environments (candle-examples, mistral.rs) and
    transformers on verify's conversations. `environments`: what the construct does in each
    environment it breaks ("refuses" or "differs"); `refusals`: the text each refusal carries;
    `lines`: where the construct is; `construct`: its name. Confirmed by that refusal, or by a
    counterfactual that removes the differing renders."""

    kind: ClassVar[ProbeKind] = "template"
    construct: str
    environments: dict[str, str]
    refusals: dict[str, str]
    lines: tuple[int, ...] = ()

    def shown_patch(self) -> dict[str, Any] | None:
        return {"environments": self.environments, "expect": self.refusals, "lines": list(self.lines)}

    def shown_expect(self) -> str | None:
        return self.construct


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplingDifference(Probe):
    """On the reference's logits at each teacher-forced step, the distribution candle's sampler
    draws from (`portkit.semantics.sampling`) against the one `generate()` draws from; `key`
    names the difference; confirmed when the distance is over its bound and the difference's own
    counterfactual removes it (`portkit.verify.sections.sampling`)."""

    kind: ClassVar[ProbeKind] = "sampling"
    key: str

    def shown_patch(self) -> dict[str, Any] | None:
        return {"sampling": self.key}


def declared_probe(
    kind: ProbeKind,
    id: str,
    *,
    patch: dict[str, Any] | None = None,
    fix_edits: dict[str, Any] | None = None,
    expect: str | None = None,
    as_candle: dict[str, Any] | None = None,
    run: ProbeRun = "prompt",
    at_load: bool = False,
    reason: str = "",
    measure: ProbeMeasure | None = None,
) -> Probe:
    """The probe a rule declares with a patch and an expected text (`Rule.finding`): a numeric
    probe runs its own patch, else the fix's edits; a crash probe is repaired by the same. The
    kinds a patch does not describe (a candle program, a reference edit, a sampling key, template
    environments) are built as their class (`Rule.probe_of`)."""
    own = dict(patch) if patch is not None else None
    own_or_fix = (own if own is not None else dict(fix_edits) if fix_edits else None) or None
    common: dict[str, Any] = {"id": id, "run": run, "measure": measure}
    if kind == "numeric":
        return CandleEdit(**common, edit=own_or_fix, as_candle=as_candle, declared=own)
    if kind == "crash":
        return ExpectedCrash(**common, expect=expect, repair=own_or_fix, at_load=at_load, declared=own)
    if kind == "tokens":
        return TokenizerEdit(**common, edit=own, expect=expect)
    if kind == "static-only":
        return NotProbed(**common, reason=reason)
    raise TypeError(f"{id}: a {kind} probe is built as its class, not from a patch")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeJson:
    """How `portkit verify` confirms a finding on the real runtimes.

    numeric: run candle on the config as written and on `patch` applied (the counterfactual),
    both against transformers; the finding is confirmed when only the patched run agrees.
    crash: candle must fail (load error or panic) with `expect` in its message.
    static-only: nothing to run (a fact about the files, not about computed numbers).
    tokens: encode verify's corpus with the tokenizers crate (tokenizer.json as written, and with
    `patch` applied to it) and with transformers; confirmed when the patch removes differing ids.

    `as_candle` (numeric): how transformers must run to compute what candle computes, for a
    behaviour candle hard-codes (an activation, a rope base, a bias it never reads), which no
    edit on candle's side undoes: `{"what": "SiLU in the MLP", "config": {key: value},
    "tensors": {name: "zero"}}`. `config` edits config.json (a dotted key reaches into a nested
    object, `rope_parameters.rope_theta`; None removes the key); `tensors` changes checkpoint
    tensors as the reference loads them. verify runs the reference so, and the finding is
    confirmed when candle agrees with it where it does not agree with transformers as written.
    template: render the chat template through the Rust environments (candle-examples,
    mistral.rs) and transformers on verify's conversations; `patch` names each environment the
    construct breaks (`environments`: "refuses" or "differs"), the text its refusal carries
    (`expect`) and the template lines; confirmed by that refusal, or by a counterfactual that
    removes the differing renders.
    sampling: on the reference's logits at each teacher-forced step, the distribution candle's
    sampler draws from (the program's, `portkit.semantics.sampling`) against the one `generate()`
    draws from; `patch` names the difference (`{"sampling": key}`); confirmed when the distance is
    over its bound and the difference's own counterfactual removes it (`portkit.verify.sections.sampling`).
    """

    kind: ProbeKind
    id: str
    patch: dict[str, Any] | None = None
    expect: str | None = None
    as_candle: dict[str, Any] | None = None

    #: pydantic reads it where `portkit.schemas` describes the JSON (this module never imports pydantic)
    __pydantic_config__ = {"extra": "forbid", "title": "Probe"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    code: str
    name: str
    message: str
    fix: Fix | None = None
    help: str | None = None  # the rule's fix title, shown as `help:` even when no automatic fix exists
    filename: str
    location: Location | None = None
    severity: Severity
    url: str | None = None
    transformers_value: Any = None
    candle_value: Any = None
    probe: Probe | None = None

    def to_json(self) -> dict[str, Any]:
        """The `--format json` object (schemas/lint-report.schema.json), keys in the published order."""
        return {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "fix": None if self.fix is None else self.fix.to_json(),
            "help": self.help,
            "filename": self.filename,
            "location": None if self.location is None else self.location.to_json(),
            "severity": self.severity,
            "url": self.url,
            "transformers_value": json_value(self.transformers_value),
            "candle_value": json_value(self.candle_value),
            "probe": None if self.probe is None else self.probe.to_json(),
        }

    def fingerprint(self, relative_to: str | None = None) -> str:
        """Stable across machines: code, path relative to the baseline, message."""
        import hashlib
        import os

        fn = self.filename
        if relative_to is not None:
            try:
                fn = os.path.relpath(fn, relative_to)
            except ValueError:
                pass
        return hashlib.sha256(f"{self.code}\0{fn}\0{self.message}".encode()).hexdigest()[:16]


def json_value(v: Any) -> Any:
    """A value as strict JSON holds it: tuples and sets become lists, keys strings, and a
    non-finite float null (what the pydantic models wrote before)."""
    if v is None or isinstance(v, (str, bool, int)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [json_value(x) for x in v]
    to_json = getattr(v, "to_json", None)
    if to_json is not None:
        return to_json()
    return str(v)
