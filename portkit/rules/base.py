"""Rule machinery: the `Rule` base class, the per-model `Context`, and the registry."""

from __future__ import annotations

import math
from functools import cached_property
from pathlib import Path

from portkit.candle_release import ALWAYS, Span
from portkit.semantics import FamilyTransformersView, GgufView, family_transformers_view, gguf_view
from portkit.target import Target

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, ClassVar, Literal, TypeVar

    from portkit.families import Family
    from portkit.families.traits import FamiliesWith
    from portkit.families.view import FamilyView
    from portkit.findings import Finding, Location, Probe, ProbeKind, ProbeMeasure, ProbeRun, Severity

    P = TypeVar("P", bound=Probe)
    from portkit.model import GgufFile, ModelFacts

    Group = Literal["config", "weights", "runtime", "gguf", "tokenizer", "embedding"]
    FixAvailability = Literal["none", "sometimes", "always"]
    Effect = Literal["silent", "load-error", "panic", "runtime-error", "none"]

DOC_HEADINGS = (
    "## What it does",
    "## Why is this bad?",
    "## Example",
    "## Fix",
    "## Candle source",
    "## Verification",
    "## References",
)
# Where each rule's generated page lives (docs/rules/PKxxx.md); change with the published repo.
DOCS_URL = "https://github.com/portkit/portkit/blob/main/docs/rules/{code}.md"


class Context:
    """One model directory under one target, with the effective-value views computed once."""

    def __init__(self, facts: ModelFacts, target: Target) -> None:
        self.facts = facts
        self.target = target

    @cached_property
    def family(self) -> Family | None:
        """The candle module this config loads into (`portkit.families`), as the target's release has it;
        None for a model_type that release has no module for. A config that names neither `model_type`
        nor `architectures` is read with the registry's default family (llama), as portkit always has."""
        family = self.detected
        return None if family is None else family.at(self.target.candle)

    @cached_property
    def detected(self) -> Family | None:
        """The family the config names, whether or not the target's release has its module."""
        doc = self.facts.config
        if doc is None or not isinstance(doc.value, dict):
            return None
        from portkit.families import detect_or_default

        return detect_or_default(doc.value)

    @cached_property
    def fv(self) -> FamilyView | None:
        """candle's effective values as the family's own module reads config.json."""
        if self.facts.config is None or self.family is None:
            return None
        return self.family.view(self.facts.config.text)

    @cached_property
    def ftv(self) -> FamilyTransformersView | None:
        """transformers' effective values for this config's family, under candle's field names,
        and whether transformers accepts the config (`refused`). A model type portkit has no
        family for is read without class defaults."""
        doc = self.facts.config
        if doc is None or not isinstance(doc.value, dict):
            return None
        gen = self.facts.generation_config.value if self.facts.generation_config else None
        family = (
            self.detected.name if self.detected is not None else None
        )  # transformers reads it whatever candle's release
        return family_transformers_view(family, doc.value, gen if isinstance(gen, dict) else None)

    def applies(self, rule: Rule | type[Rule]) -> bool:
        """Whether `rule` speaks about this model's candle module. Without a config.json there is
        no module to speak about: the rules that need none (a GGUF alone) decide for themselves."""
        if not rule.holds.holds(self.target.candle):
            return False
        if "*" in rule.families or self.facts.config is None:
            return True
        return self.family is not None and self.family.name in rule.families

    @cached_property
    def ggufs(self) -> list[tuple[GgufFile, GgufView]]:
        return [(g, gguf_view(g, self.target.candle)) for g in self.facts.ggufs]

    @property
    def config_path(self) -> str:
        return str(self.facts.root / "config.json")

    def loc(self, *keys: str) -> Location:
        """Position of a config.json key (deepest that exists), else 1:1."""
        doc = self.facts.config
        pos = doc.position(*keys) if doc is not None and keys else None
        return location(pos)

    def has_key(self, key: str) -> bool:
        doc = self.facts.config
        return doc is not None and isinstance(doc.value, dict) and key in doc.value


class Rule:
    """One check. Subclasses set the class attributes and implement `check`.

    The class docstring is the rule's documentation (`portkit explain`), with the headings in
    `DOC_HEADINGS`; a test fails when one is missing.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    group: ClassVar[Group]
    # the model families (candle modules, `portkit.families`) the rule speaks about; "*": all,
    # including a model_type candle has no module for
    # a tuple of registry names (portkit.families), or the families a trait selects (`FamiliesWith`)
    families: ClassVar[tuple[str, ...] | FamiliesWith] = ("llama",)
    severity: ClassVar[Severity] = "error"
    effect: ClassVar[Effect] = "silent"
    fix_availability: ClassVar[FixAvailability] = "none"
    fix_title: ClassVar[str]
    probe_kind: ClassVar[ProbeKind] = "static-only"
    #: Why verify does not probe a finding of this rule whose probe is static-only: `portkit
    #: verify` reports it NOT-PROBED with this reason (never NOT-REPRODUCED: nothing ran).
    not_probed: ClassVar[str] = "a fact about the files that no forward pass shows"
    needs: ClassVar[tuple[str, ...]] = ("config",)  # config | safetensors | gguf | tokenizer | generation_config
    # the run of `portkit verify` its probe needs: "prompt" (the one every verify makes), "tokens"
    # (the tokens section: both tokenizers' ids, no forward), "turns" (a continuation on the warm
    # KV cache, `--turns`), "batch" (rows in one forward, `--batch`) or "padded-batch" (the same
    # rows through the module's forward that takes a padding mask)
    probe_run: ClassVar[ProbeRun] = "prompt"
    #: what verify's confirmer counts for it, where its run measures several things (`ProbeMeasure`)
    probe_measure: ClassVar[ProbeMeasure | None] = None
    #: the candle releases the rule's fact holds for (`portkit.candle_release.Span`): on any other
    #: target release the rule is silent, and `explain` prints the range
    holds: ClassVar[Span] = ALWAYS

    def check(self, ctx: Context) -> Iterable[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def doc(cls) -> str:
        import inspect  # docs only (`explain`, `rules`, SARIF): not on the lint path

        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        return cls.doc().split("\n\n", 1)[0] if cls.__doc__ else cls.name

    def finding(
        self,
        ctx: Context,
        message: str,
        *,
        filename: str | Path | None = None,
        location: Location | None | Literal["config"] = "config",
        keys: tuple[str, ...] = (),
        transformers_value: Any = None,
        candle_value: Any = None,
        fix_edits: dict[str, Any] | None = None,
        probe_patch: dict[str, Any] | None = None,
        expect: str | None = None,
        severity: Severity | None = None,
        help: str | None = None,
        probe_kind: ProbeKind | None = None,
        as_candle: dict[str, Any] | None = None,
        probe: Probe | None = None,
    ) -> Finding:
        """`probe_kind` overrides the rule's for a finding whose effect differs from the rule's
        usual one (for example a layer-count mismatch that candle runs without crashing);
        `as_candle`: transformers run as candle computes (`CandleEdit.as_candle`, `portkit.rules.as_candle`);
        `probe`: a probe of another kind (`probe_of`), instead of the one the other arguments describe."""
        from portkit.findings import Finding, Fix  # see `location()`

        if location == "config":
            location = ctx.loc(*keys)
        return Finding(
            code=self.code,
            name=self.name,
            message=message,
            fix=Fix(message=self.fix_title, edits=dict(fix_edits)) if fix_edits is not None else None,
            help=help or self.fix_title,
            filename=str(filename) if filename is not None else ctx.config_path,
            location=location,
            severity=severity or self.severity,
            url=DOCS_URL.format(code=self.code),
            transformers_value=_jsonable(transformers_value),
            candle_value=_jsonable(candle_value),
            probe=probe or self._probe(probe_kind or self.probe_kind, probe_patch, fix_edits, expect, as_candle),
        )

    def _probe(
        self,
        kind: ProbeKind,
        probe_patch: dict[str, Any] | None,
        fix_edits: dict[str, Any] | None,
        expect: str | None,
        as_candle: dict[str, Any] | None,
    ) -> Probe:
        """The finding's probe, with what verify needs from the rule (its run, whether its failure
        comes at load, why it is not probed) read once, here."""
        from portkit.findings import declared_probe

        return declared_probe(
            kind,
            self.code,
            patch=probe_patch,
            fix_edits=fix_edits,
            expect=expect,
            as_candle=as_candle,
            run=self.probe_run,
            at_load=self.effect == "load-error",
            reason=self.not_probed,
            measure=self.probe_measure,
        )

    def probe_of(self, cls: type[P], **fields: Any) -> P:
        """A probe of kind `cls` for this rule's findings: its code, run and measure, and `fields`."""
        return cls(id=self.code, run=self.probe_run, measure=self.probe_measure, **fields)


def location(pos: tuple[int, int] | None) -> Location:
    """A finding's position, 1:1 when unknown. `portkit.findings` loads with the first finding:
    a clean lint (what a pre-commit hook runs most) never builds one."""
    from portkit.findings import Location

    return Location(row=pos[0], column=pos[1]) if pos else Location(row=1, column=1)


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return v


def backticked(names: list[str], k: int = 3) -> str:
    """The first `k` names, backticked, then how many more: "`a`, `b`, `c` and 4 more"."""
    shown = ", ".join(f"`{x}`" for x in names[:k])
    return shown + (f" and {len(names) - k} more" if len(names) > k else "")


def num(v: Any) -> str:
    """A value as a message shows it: 100000.0 -> 100000, 1e-05 -> 1e-05, [1, 2] -> [1, 2]."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isfinite(v) and v == int(v) and abs(v) < 1e16:
            return str(int(v))
        return repr(v)
    if v is None:
        return "null"
    return str(v)


def f32(x: float) -> float:
    import struct

    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)
