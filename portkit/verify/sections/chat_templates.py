"""verify's chat-template check: the prompt a Rust program renders from the model's chat template,
against the one transformers renders.

The template transformers uses (chat_template.jinja over tokenizer_config.json's) is rendered on a
built-in set of conversations (one user turn, a system turn, several turns, with and without the
generation prompt, a message with a None field, and tools when the template takes them):

- transformers: `apply_chat_template(..., tokenize=False)` on the loaded tokenizer, which is its
  `render_jinja_template` (utils/chat_template_utils.py) after dropping None-valued message keys;
- each Rust environment of the native wheel (`portkit_native.render_chat_template`):
  `candle-examples` (candle's candle-examples-0.11.0/src/chat_template.rs) and `mistral.rs`
  (mistralrs-core's `apply_chat_template_to`), on minijinja 2.14.0, with tokenizer_config.json's
  special tokens as each reads them.

Per environment: how many renders differ (a refusal counts), the first one with both texts around
the first differing character, and the ids each gives (the render encoded as
`apply_chat_template` encodes its own: no special tokens added; the Rust side with the tokenizers
crate candle uses). Each chat-template finding (probe kind `template`, PK512-PK518) is confirmed
from the renders: a refusal by the environment's own error text, a different text by a
counterfactual that removes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portkit.findings import Finding, TemplateEnvironments
from portkit.verify.corpus import Conversation, Render, conversations_for, edited_template, template_edits
from portkit.verify.errors import one_line
from portkit.verify.judge.verdicts import Confirmation, Verdict, fails_as_predicted, fewer, identity
from portkit.verify.reference.tokenizer import render_transformers

ENVIRONMENTS = ("candle-examples", "mistral.rs")


@dataclass
class TemplateSection:
    """The template's renders: transformers' and each environment's, conversation by conversation."""

    source: str  # the file the template comes from
    template: str
    conversations: list[Conversation]
    transformers: list[Render]
    environments: dict[str, list[Render]]
    findings: list[Confirmation] = field(default_factory=list)

    def compared(self) -> list[int]:
        """The conversations transformers renders (the others say nothing about a Rust program)."""
        return [i for i, r in enumerate(self.transformers) if r.text is not None]

    def given(self, env: str) -> list[int]:
        """The compared conversations `env` can be given (candle-examples takes no tools)."""
        return [i for i in self.compared() if self.environments[env][i].cannot is None]

    def differing(self, env: str, against: Sequence[str | None] | None = None) -> list[int]:
        """Conversations where `env` refuses or renders another text than transformers (or `against`)."""
        ref = against if against is not None else [r.text for r in self.transformers]
        out = []
        for i in self.compared():
            r = self.environments[env][i]
            if r.cannot is None and r.text != ref[i]:
                out.append(i)
        return out

    @property
    def ok(self) -> bool:
        return not any(self.differing(env) for env in self.environments)

    def first(self, env: str) -> int | None:
        d = self.differing(env)
        return d[0] if d else None

    def to_json(self) -> dict[str, Any]:
        envs = {}
        for env, renders in self.environments.items():
            d = self.differing(env)
            envs[env] = {
                "differing": len(d),
                "refused": sum(1 for i in d if renders[i].error is not None),
                "of": len(self.given(env)),
                "first": None if not d else first_difference(self, env, d[0]),
                "renders": [r.to_json() for r in renders],
            }
        return {
            "source": self.source,
            "conversations": [c.to_json() for c in self.conversations],
            "transformers": [r.to_json() for r in self.transformers],
            "environments": envs,
        }


# --------------------------------------------------------------------------- rendering


def special_tokens(root: Path) -> dict[str, str | None]:
    """bos/eos/unk as tokenizer_config.json names them (a string, or an AddedToken's `content`),
    which both Rust programs read (candle-examples' `StringOrToken`, mistral.rs's `BeginEndUnkPadTok`)."""
    try:
        doc = json.loads((root / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    out: dict[str, str | None] = {}
    for key in ("bos_token", "eos_token", "unk_token"):
        v = doc.get(key) if isinstance(doc, dict) else None
        if isinstance(v, dict):
            v = v.get("content")
        out[key] = v if isinstance(v, str) else None
    return out


def render_rust(
    pn: Any,
    env: str,
    template: str,
    conv: Conversation,
    tokens: dict[str, str | None],
    crate: Any = None,
    **switches: Any,
) -> Render:
    try:
        text = pn.render_chat_template(
            env,
            template,
            [dict(m) for m in conv.messages],
            add_generation_prompt=conv.add_generation_prompt,
            tools=list(conv.tools) if conv.tools else None,
            **tokens,
            **switches,
        )
    except pn.ChatTemplateError as e:
        return Render(error=one_line(e))
    except (ValueError, NotImplementedError) as e:
        return Render(cannot=one_line(e))
    ids = list(crate.encode(text, False)) if crate is not None else None
    return Render(text=text, ids=ids)


def template_section(
    root: Path, tok: Any, crate: Any, findings: Sequence[Finding], progress: Callable[[str], None] = lambda _s: None
) -> TemplateSection | None:
    """The section for the model's chat template, or None when transformers has none."""
    template = getattr(tok, "chat_template", None)
    if not isinstance(template, str) or not template:
        return None
    from portkit.verify.sections.tokenize import _native

    pn = _native()
    progress("tokenizer: the chat template in candle-examples, mistral.rs and transformers")
    convs = conversations_for(template)
    tf = [render_transformers(tok, c) for c in convs]
    tokens = special_tokens(root)
    envs = {env: [render_rust(pn, env, template, c, tokens, crate) for c in convs] for env in ENVIRONMENTS}
    jinja = root / "chat_template.jinja"
    sec = TemplateSection(str(jinja if jinja.is_file() else root / "tokenizer_config.json"), template, convs, tf, envs)
    sec.findings = confirm(
        findings,
        sec,
        lambda env, c, **sw: render_rust(pn, env, template, c, tokens, None, **sw),
        lambda c, t: render_transformers(tok, c, t),
    )
    return sec


# --------------------------------------------------------------------------- the findings


class _Measure:
    """How many conversations differ in one environment once some causes are taken away."""

    def __init__(
        self, sec: TemplateSection, rust: Callable[..., Render], transformers: Callable[[Conversation, str], Render]
    ) -> None:
        self.sec, self.rust, self.transformers = sec, rust, transformers
        self.edits = template_edits()
        self.cache: dict[tuple[str, tuple[str, ...]], int] = {}

    def __call__(self, env: str, constructs: Sequence[str]) -> int:
        key = (env, tuple(sorted(set(constructs))))
        if key not in self.cache:
            sec, switches = self.sec, {}
            for c in key[1]:
                switches.update(self.edits[c][1])
            template = edited_template(sec.template, key[1], self.edits)
            ref = (
                [r.text for r in sec.transformers]
                if template == sec.template
                else [self.transformers(c, template).text for c in sec.conversations]
            )
            if switches:
                got = [self.rust(env, c, **switches) for c in sec.conversations]
            else:
                got = sec.environments[env]
            self.cache[key] = sum(1 for i in sec.compared() if got[i].cannot is None and got[i].text != ref[i])
        return self.cache[key]


def _probe(f: Finding) -> TemplateEnvironments | None:
    return f.probe if isinstance(f.probe, TemplateEnvironments) else None


def _claims(f: Finding) -> dict[str, str]:
    p = _probe(f)
    return dict(p.environments) if p is not None else {}


def confirm(
    findings: Sequence[Finding],
    sec: TemplateSection,
    rust: Callable[..., Render],
    transformers: Callable[[Conversation, str], Render],
) -> list[Confirmation]:
    """Each template finding judged from the renders; every environment it names must do what it
    says. A refusal: the environment's error carries the expected text. Another text: the renders
    differ, and taking the cause away (`template_edits`, after the other findings' causes in
    that environment) leaves fewer that differ."""
    out = []
    measure = _Measure(sec, rust, transformers)
    edits = measure.edits
    for f in findings:
        claims, p = _claims(f), _probe(f)
        expect = p.refusals if p is not None else {}
        construct = p.construct if p is not None else None
        parts, confirmed, refusal, details = [], True, False, {}
        for env, what in claims.items():
            renders = sec.environments.get(env)
            if renders is None:
                parts.append(f"{env}: not rendered")
                confirmed = False
                continue
            differ, n = sec.differing(env), len(sec.given(env))
            if what == "refuses":
                want = expect.get(env, "")
                hits = [i for i in differ if (err := renders[i].error) is not None and fails_as_predicted(want, err)]
                details[env] = {"claim": what, "expect": want, "refused": len(hits), "of": n}
                if hits:
                    refusal = True
                    parts.append(f"{env} refuses {len(hits)} of {n} conversations: {renders[hits[0]].error}")
                else:
                    confirmed = False
                    other = next((renders[i].error for i in differ if renders[i].error), None)
                    parts.append(
                        f"{env} refuses, but not as predicted: {other}"
                        if other
                        else f"{env} renders all {n} conversations without `{want}` (none reaches it)"
                    )
                continue
            details[env] = {"claim": what, "differing": len(differ), "of": n}
            if not differ:
                confirmed = False
                parts.append(f"{env} renders all {n} conversations as transformers does")
                continue
            if construct not in edits:
                parts.append(f"{env} renders {len(differ)} of {n} conversations otherwise")
                continue
            others = sorted(
                {
                    gp.construct
                    for g in findings
                    for gp in [_probe(g)]
                    if g is not f and gp is not None and gp.construct in edits and _claims(g).get(env) == "differs"
                }
            )
            before, after = measure(env, others), measure(env, [*others, construct])
            label = edits[construct][2]
            label = f"{env} with {label}" if edits[construct][0] is None else label
            details[env].update(counterfactual=label, before=before, after=after)
            prefix = "with the other findings' causes taken away, " if others else ""
            if fewer(after=after, before=before):
                parts.append(
                    f"{env} renders {len(differ)} of {n} conversations otherwise; {prefix}{before}, and with {label}, "
                    f"{after}"
                )
            elif others and fewer(before=measure(env, []), after=measure(env, [construct])):
                alone = measure(env, [construct])
                details[env].update(alone=alone)
                parts.append(f"{env} renders {len(differ)} of {n} conversations otherwise; with {label} alone, {alone}")
            else:
                confirmed = False
                parts.append(
                    f"{env} renders {len(differ)} of {n} conversations otherwise, and {after} with {label}: another "
                    "cause"
                )
        verdict: Verdict = ("CRASH-CONFIRMED" if refusal else "CONFIRMED") if confirmed and claims else "NOT-REPRODUCED"
        out.append(
            Confirmation(
                **identity(f, "template"),
                verdict=verdict,
                evidence="; ".join(parts) or "no environment named",
                details=details,
            )
        )
    return out


# --------------------------------------------------------------------------- text


def around(a: str, b: str, k: int = 24) -> tuple[int, str, str]:
    """(offset of the first differing character, each text around it)."""
    i = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, i - k)
    return (
        i,
        ("..." if lo else "") + a[lo : i + k] + ("..." if len(a) > i + k else ""),
        ("..." if lo else "") + b[lo : i + k] + ("..." if len(b) > i + k else ""),
    )


def first_id_difference(a: Sequence[int], b: Sequence[int]) -> int:
    return next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def first_difference(sec: TemplateSection, env: str, i: int) -> dict[str, Any]:
    r, t = sec.environments[env][i], sec.transformers[i]
    out: dict[str, Any] = {"conversation": sec.conversations[i].name, "error": r.error}
    if r.text is not None and t.text is not None:
        at, mine, theirs = around(r.text, t.text)
        out.update(offset=at, environment=mine, transformers=theirs)
    if r.ids is not None and t.ids is not None:
        k = first_id_difference(r.ids, t.ids)
        lo = max(0, k - 3)
        out.update(id_offset=k, environment_ids=r.ids[lo : k + 5], transformers_ids=t.ids[lo : k + 5])
    return out
