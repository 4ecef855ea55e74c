"""What the tokenizer rules share: the group's base class and its two kinds of rule, one part
of the pipeline that transformers rebuilds (`RebuiltPart`) and one construct of the chat
template a Rust environment renders otherwise (`ChatTemplateRule`)."""

from __future__ import annotations

from portkit.rules.base import Context, Rule, location
from portkit.rules.tokenizer.analysis import analysis, chat_template_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, ClassVar

    from portkit.findings import Finding, ProbeKind, ProbeRun
    from portkit.rules.tokenizer.analysis import TokenizerAnalysis
    from portkit.semantics import tokenizer as S


class TokenizerRule(Rule):
    """A PK5xx rule: read from the tokenizer files whatever module runs the model, probed by
    verify's tokens section unless the rule says otherwise.

    `portkit fix` asks the rule what fixes its finding in tokenizer.json
    (`tokenizer_changes`) and, when nothing does, why (`refusal`): `portkit.tokenizer_fix`
    knows no rule by its code."""

    group = "tokenizer"
    probe_run: ClassVar[ProbeRun] = "tokens"  # verify's tokens section: the ids on both sides, before any forward
    families: ClassVar[tuple[str, ...]] = ("*",)  # the tokenizer is read the same way whatever module runs the model
    needs = ("tokenizer",)
    probe_kind: ClassVar[ProbeKind] = "tokens"

    def at(self, a: TokenizerAnalysis, key: str) -> Any:
        assert a.tj is not None
        return location(a.tj.position(key))

    def edit_finding(
        self,
        ctx: Context,
        a: TokenizerAnalysis,
        message: str,
        *,
        key: str,
        transformers_value: Any,
        candle_value: Any,
        edit: dict[str, Any],
        expect: str,
        location: Any = None,
        severity: Any = None,
    ) -> Finding:
        """A finding on tokenizer.json whose fix and whose verify probe are the same edit."""
        assert a.tj is not None
        return self.finding(
            ctx,
            message,
            filename=a.tj.path,
            location=location or self.at(a, key),
            transformers_value=transformers_value,
            candle_value=candle_value,
            fix_edits=edit,
            probe_patch=edit,
            expect=expect,
            severity=severity,
        )

    def tokenizer_changes(self, finding: Finding, ctx: Context) -> dict[str, Any] | None:
        """What `portkit fix` writes into tokenizer.json for `finding` (found in `ctx`): top-level
        keys and their new values (`portkit.model.tokenizer_edit.apply_changes`), or None when
        no tokenizer.json edit fixes it (the finding remains, with `refusal`'s reason). A rule
        that overrides this has `fix_availability` other than "none"."""
        return None

    def refusal(self, finding: Finding) -> str:
        """Why `portkit fix` leaves `finding` for a person (`tokenizer_changes` is None)."""
        return f"not a tokenizer.json edit: {finding.help}"


class SpecialsNormalizedFalse(TokenizerRule):
    """A rule whose fix, and the edit its verify probe measures, is `normalized: false` on the special
    tokens its finding names (`{"normalized_false": [...]}`): PK505 and PK519."""

    fix_availability = "always"
    fix_title = "Set `normalized` to false on the special tokens in tokenizer.json (`portkit fix --write`)"

    def tokenizer_changes(self, finding: Finding, ctx: Context) -> dict[str, Any] | None:
        """`normalized` false on the special tokens the finding names (its fix's edits; None without one)."""
        from portkit.model.tokenizer_edit import probe_changes

        return probe_changes(finding.fix.edits) if finding.fix is not None else None


class RebuiltPart(TokenizerRule):
    """A rule about one part of the pipeline the class transformers picks builds otherwise
    (`S.differences`): one finding at that part's key, whose edit is what transformers builds."""

    part: ClassVar[str]  # a `S.Difference.part`
    key: ClassVar[str]  # the tokenizer.json key the finding points at

    def check(self, ctx: Context) -> Iterable[Finding]:
        a = analysis(ctx)
        d = a.differences.get(self.part)
        if d is None or a.crate is None or a.transformers is None:
            return
        message, edit, expect = self.describe(a, a.crate, a.transformers, d)
        yield self.edit_finding(
            ctx,
            a,
            message,
            key=self.key,
            transformers_value=d.transformers,
            candle_value=d.crate,
            edit=edit,
            expect=expect,
        )

    def describe(
        self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference
    ) -> tuple[str, dict[str, Any], str]:
        """(message, the edit that fixes and measures this finding, the texts it changes)."""
        raise NotImplementedError

    def tokenizer_changes(self, finding: Finding, ctx: Context) -> dict[str, Any] | None:
        """The part at `key` as transformers builds it (`TransformersTokenizer.<key>`): fix writes
        what transformers builds, even where the finding's probe patch measures the part alone."""
        a = analysis(ctx)
        assert a.transformers is not None and a.crate is not None
        return {self.key: getattr(a.transformers, self.key)(a.crate)}


_HOW = {"refuses": "refuses to render it", "differs": "renders another text"}


class ChatTemplateRule(TokenizerRule):
    """A construct of the chat template that a Rust environment (candle-examples, mistral.rs)
    refuses or renders otherwise than transformers: one finding at its first place, the others
    counted, each environment it breaks named with what it does."""

    construct: ClassVar[str]  # a `portkit.semantics.chat_template.SCANNERS` key
    probe_kind = "template"
    fix_availability = "none"

    def check(self, ctx: Context) -> Iterable[Finding]:
        from portkit.semantics import chat_template as T

        tpl = chat_template_text(ctx)
        if tpl is None or tpl.scan is None:
            return
        found = T.constructs(tpl.scan, self.construct)
        if not found:
            return
        effects: dict[str, str] = {}
        expect: dict[str, str] = {}
        for c in found:
            for env, what in c.effects.items():
                if effects.get(env) != "refuses":  # a refusal anywhere is what that environment does
                    effects[env] = what
                if env in c.expect:
                    expect.setdefault(env, c.expect[env])
        envs = [e for e in T.ENVIRONMENTS if e in effects]
        first = found[0]
        where = f"line {first.line}" if tpl.in_jinja else f"template line {first.line}"
        more = ""
        if len(found) > 1:
            lines = sorted({c.line for c in found[1:]})
            shown = ", ".join(map(str, lines[:4])) + (f" and {len(lines) - 4} more" if len(lines) > 4 else "")
            more = f"; {len(found) - 1} more at line{'s' if len(lines) > 1 else ''} {shown}"
        message = self.describe(first, found, effects, f"{where}{more}")
        from portkit.findings import TemplateEnvironments  # with the first finding (`portkit.rules.base.location`)

        probe = self.probe_of(
            TemplateEnvironments,
            construct=self.construct,
            environments={e: effects[e] for e in envs},
            refusals=expect,
            lines=tuple(sorted({c.line for c in found})),
        )
        yield self.finding(
            ctx,
            message,
            filename=tpl.path,
            location=tpl.location(first.line, first.column),
            transformers_value="renders it",
            candle_value={e: _HOW[effects[e]] for e in envs},
            probe=probe,
        )

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        raise NotImplementedError
