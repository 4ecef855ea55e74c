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

import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from portkit.findings import Finding
from portkit.verify.confirm import Confirmation

USER = "Hi! What is 2 + 2?"
SYSTEM = "You are a helpful assistant."
ANSWER = "2 + 2 is 4."
FOLLOW_UP = "And 3 + 3?"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}}, "required": ["city"]},
    },
}
WEATHER_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}


@dataclass(frozen=True)
class Conversation:
    name: str
    messages: tuple[dict[str, Any], ...]
    add_generation_prompt: bool
    tools: tuple[dict[str, Any], ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "messages": list(self.messages), "add_generation_prompt": self.add_generation_prompt, "tools": list(self.tools) if self.tools else None}


def _user(text: str = USER) -> dict[str, Any]:
    return {"role": "user", "content": text}


CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation("one user turn", (_user(),), True),
    Conversation("one user turn, no generation prompt", (_user(),), False),
    Conversation("a system turn", ({"role": "system", "content": SYSTEM}, _user()), True),
    Conversation("a system turn, no generation prompt", ({"role": "system", "content": SYSTEM}, _user()), False),
    Conversation("several turns", (_user(), {"role": "assistant", "content": ANSWER}, _user(FOLLOW_UP)), True),
    Conversation("several turns, ending with the assistant", ({"role": "system", "content": SYSTEM}, _user(), {"role": "assistant", "content": ANSWER}), False),
    # what the OpenAI SDK hands back: `tool_calls=None` on a plain answer
    Conversation("a message with a None field", (_user(), {"role": "assistant", "content": ANSWER, "tool_calls": None}, _user(FOLLOW_UP)), True),
)
TOOL_CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation("tools", (_user("What is the weather in Paris?"),), True, (WEATHER_TOOL,)),
    Conversation(
        "tools, a call and its result",
        (_user("What is the weather in Paris?"), {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]}, {"role": "tool", "content": '{"temperature": 21}'}),
        True,
        (WEATHER_TOOL,),
    ),
)
ENVIRONMENTS = ("candle-examples", "mistral.rs")
_TAKES_TOOLS = re.compile(r"\btools\b")


def conversations_for(template: str) -> list[Conversation]:
    """The built-in conversations, with the tool ones when the template reads `tools`."""
    return list(CONVERSATIONS) + (list(TOOL_CONVERSATIONS) if _TAKES_TOOLS.search(template) else [])


@dataclass
class Render:
    text: str | None = None
    error: str | None = None  # the environment's refusal, its own text
    cannot: str | None = None  # a conversation the program cannot be given, or what portkit does not reproduce
    ids: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "error": self.error, "cannot": self.cannot, "ids": self.ids}


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


def _one_line(e: BaseException, n: int = 300) -> str:
    return " ".join(str(e).split())[:n]


def render_rust(pn: Any, env: str, template: str, conv: Conversation, tokens: dict[str, str | None], crate: Any = None, **switches: Any) -> Render:
    try:
        text = pn.render_chat_template(
            env, template, [dict(m) for m in conv.messages], add_generation_prompt=conv.add_generation_prompt,
            tools=list(conv.tools) if conv.tools else None, **tokens, **switches,
        )  # fmt: skip
    except pn.ChatTemplateError as e:
        return Render(error=_one_line(e))
    except (ValueError, NotImplementedError) as e:
        return Render(cannot=_one_line(e))
    ids = list(crate.encode(text, False)) if crate is not None else None
    return Render(text=text, ids=ids)


def render_transformers(tok: Any, conv: Conversation, template: str | None = None) -> Render:
    kw: dict[str, Any] = {"add_generation_prompt": conv.add_generation_prompt, "tokenize": False}
    if conv.tools:
        kw["tools"] = list(conv.tools)
    if template is not None:
        kw["chat_template"] = template
    try:
        text = tok.apply_chat_template([dict(m) for m in conv.messages], **kw)
    except Exception as e:  # noqa: BLE001 - the template may raise (a role it does not take): that conversation is not compared
        return Render(error=_one_line(e))
    return Render(text=text, ids=list(tok.encode(text, add_special_tokens=False)))


def template_section(root: Path, tok: Any, crate: Any, findings: Sequence[Finding], progress: Callable[[str], None] = lambda _s: None,
                     *, perturb: bool = False) -> TemplateSection | None:  # fmt: skip
    """The section for the model's chat template, or None when transformers has none.

    `perturb` (the negative control): one character of transformers' first render is changed
    after rendering, so the difference goes through the same counting and reporting."""
    template = getattr(tok, "chat_template", None)
    if not isinstance(template, str) or not template:
        return None
    from portkit.verify.tokenize import _native

    pn = _native()
    progress("tokenizer: the chat template in candle-examples, mistral.rs and transformers")
    convs = conversations_for(template)
    tf = [render_transformers(tok, c) for c in convs]
    if perturb and tf and tf[0].text:
        t = tf[0].text
        tf[0].text = t[:-1] + ("x" if t[-1:] != "x" else "y")
    tokens = special_tokens(root)
    envs = {env: [render_rust(pn, env, template, c, tokens, crate) for c in convs] for env in ENVIRONMENTS}
    jinja = root / "chat_template.jinja"
    sec = TemplateSection(str(jinja if jinja.is_file() else root / "tokenizer_config.json"), template, convs, tf, envs)
    sec.findings = confirm(findings, sec, lambda env, c, **sw: render_rust(pn, env, template, c, tokens, None, **sw), lambda c, t: render_transformers(tok, c, t))
    return sec


# --------------------------------------------------------------------------- the findings


def _base(f: Finding) -> dict[str, Any]:
    return dict(code=f.code, name=f.name, severity=f.severity, message=f.message, filename=f.filename, probe_kind="template")


#: What removes a "differs" claim's cause, per construct: an edit of the template transformers
#: renders (what the environment does to it) or settings of the environment (what it lacks).
def _counterfactuals() -> dict[str, tuple[Callable[[str], str] | None, dict[str, bool], str]]:
    from portkit.semantics import chat_template as T

    return {
        "whitespace": (None, {"trim_blocks": True, "lstrip_blocks": True}, "trim_blocks and lstrip_blocks set"),
        "negative-step": (
            lambda t: T.MISTRAL_RS_DESCENDING_RANGE.sub(r"range(\g<expr>)|reverse", t),
            {},
            "transformers given mistral.rs's `range(n)|reverse` rewrite",
        ),
        "tojson": (T.without_tojson_arguments, {}, "transformers given the template without the `tojson` arguments mistral.rs ignores"),
    }


def edited_template(template: str, constructs: Sequence[str], edits: dict[str, Any] | None = None) -> str:
    """`template` with the edits of `constructs` (`_counterfactuals`), in their sorted order."""
    edits = edits if edits is not None else _counterfactuals()
    for c in sorted(set(constructs)):
        edit = edits[c][0]
        template = edit(template) if edit is not None else template
    return template


def transformers_renders(tok: Any) -> None:
    """Every render the check may ask of transformers' tokenizer `tok`: each conversation with
    the model's template, and with every combination of the template edits `_Measure` may make
    (`portkit.verify.tokrecord.record` makes them in the reference's process, so the check runs
    on its record)."""
    template = getattr(tok, "chat_template", None)
    if not isinstance(template, str) or not template:
        return
    convs = conversations_for(template)
    for c in convs:
        render_transformers(tok, c)
    editable = sorted(c for c, (edit, _sw, _label) in _counterfactuals().items() if edit is not None)
    for n in range(1, len(editable) + 1):
        for combo in itertools.combinations(editable, n):
            edited = edited_template(template, combo)
            if edited != template:
                for c in convs:
                    render_transformers(tok, c, edited)


class _Measure:
    """How many conversations differ in one environment once some causes are taken away."""

    def __init__(self, sec: TemplateSection, rust: Callable[..., Render], transformers: Callable[[Conversation, str], Render]) -> None:
        self.sec, self.rust, self.transformers = sec, rust, transformers
        self.edits = _counterfactuals()
        self.cache: dict[tuple[str, tuple[str, ...]], int] = {}

    def __call__(self, env: str, constructs: Sequence[str]) -> int:
        key = (env, tuple(sorted(set(constructs))))
        if key not in self.cache:
            sec, switches = self.sec, {}
            for c in key[1]:
                switches.update(self.edits[c][1])
            template = edited_template(sec.template, key[1], self.edits)
            ref = [r.text for r in sec.transformers] if template == sec.template else [self.transformers(c, template).text for c in sec.conversations]
            if switches:
                got = [self.rust(env, c, **switches) for c in sec.conversations]
            else:
                got = sec.environments[env]
            self.cache[key] = sum(1 for i in sec.compared() if got[i].cannot is None and got[i].text != ref[i])
        return self.cache[key]


def _claims(f: Finding) -> dict[str, str]:
    patch = (f.probe.patch if f.probe else None) or {}
    return dict(patch.get("environments", {}))


def confirm(findings: Sequence[Finding], sec: TemplateSection, rust: Callable[..., Render], transformers: Callable[[Conversation, str], Render]) -> list[Confirmation]:
    """Each template finding judged from the renders; every environment it names must do what it
    says. A refusal: the environment's error carries the expected text. Another text: the renders
    differ, and taking the cause away (`_counterfactuals`, after the other findings' causes in
    that environment) leaves fewer that differ."""
    out = []
    measure = _Measure(sec, rust, transformers)
    edits = measure.edits
    for f in findings:
        claims = _claims(f)
        expect: dict[str, str] = ((f.probe.patch if f.probe else None) or {}).get("expect", {})
        construct = f.probe.expect if f.probe else None
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
                hits = [i for i in differ if renders[i].error is not None and want in renders[i].error]
                details[env] = {"claim": what, "expect": want, "refused": len(hits), "of": n}
                if hits:
                    refusal = True
                    parts.append(f"{env} refuses {len(hits)} of {n} conversations: {renders[hits[0]].error}")
                else:
                    confirmed = False
                    other = next((renders[i].error for i in differ if renders[i].error), None)
                    parts.append(f"{env} refuses, but not as predicted: {other}" if other else f"{env} renders all {n} conversations without `{want}` (none reaches it)")
                continue
            details[env] = {"claim": what, "differing": len(differ), "of": n}
            if not differ:
                confirmed = False
                parts.append(f"{env} renders all {n} conversations as transformers does")
                continue
            if construct not in edits:
                parts.append(f"{env} renders {len(differ)} of {n} conversations otherwise")
                continue
            others = sorted({g.probe.expect for g in findings if g is not f and g.probe and g.probe.expect in edits and _claims(g).get(env) == "differs"})  # type: ignore[misc]
            before, after = measure(env, others), measure(env, [*others, construct])
            label = edits[construct][2]  # type: ignore[index]
            label = f"{env} with {label}" if edits[construct][0] is None else label  # type: ignore[index]
            details[env].update(counterfactual=label, before=before, after=after)
            prefix = "with the other findings' causes taken away, " if others else ""
            if before > after:
                parts.append(f"{env} renders {len(differ)} of {n} conversations otherwise; {prefix}{before}, and with {label}, {after}")
            elif others and measure(env, []) > measure(env, [construct]):
                alone = measure(env, [construct])
                details[env].update(alone=alone)
                parts.append(f"{env} renders {len(differ)} of {n} conversations otherwise; with {label} alone, {alone}")
            else:
                confirmed = False
                parts.append(f"{env} renders {len(differ)} of {n} conversations otherwise, and {after} with {label}: another cause")
        verdict = ("CRASH-CONFIRMED" if refusal else "CONFIRMED") if confirmed and claims else "NOT-REPRODUCED"
        out.append(Confirmation(**_base(f), verdict=verdict, evidence="; ".join(parts) or "no environment named", details=details))  # type: ignore[arg-type]
    return out


# --------------------------------------------------------------------------- text


def around(a: str, b: str, k: int = 24) -> tuple[int, str, str]:
    """(offset of the first differing character, each text around it)."""
    i = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    lo = max(0, i - k)
    return i, ("..." if lo else "") + a[lo : i + k] + ("..." if len(a) > i + k else ""), ("..." if lo else "") + b[lo : i + k] + ("..." if len(b) > i + k else "")


def first_id_difference(a: Sequence[int], b: Sequence[int]) -> int:
    return next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


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


def text_lines(sec: TemplateSection) -> list[str]:
    """The section as rich markup lines (under verify's tokens section)."""
    from rich.markup import escape

    skipped = len(sec.conversations) - len(sec.compared())
    head = f"  template {len(sec.conversations)} conversations" + (f" ({skipped} transformers refuses)" if skipped else "") + f", {escape(sec.source)}"
    out = [head]
    for env in sec.environments:
        d, n = sec.differing(env), len(sec.given(env))
        refused = sum(1 for i in d if sec.environments[env][i].error is not None)
        cannot = sum(1 for r in sec.environments[env] if r.cannot is not None)
        mark = "[green]OK[/]" if not d else "[red]MISMATCH[/]"
        extra = (f", {refused} refused" if refused else "") + (f"; {cannot} it cannot be given" if cannot else "")
        out.append(f"    {env:<16} {len(d)} of {n} renders differ{extra}  {mark}")
        if d:
            fd = first_difference(sec, env, d[0])
            out.append(f"      first: {escape(fd['conversation'])}")
            if fd.get("error"):
                out.append(f"        {env} refuses: {escape(fd['error'])}")
            elif "offset" in fd:
                out.append(f"        at character {fd['offset']}:")
                out.append(f"        {env:<14} {escape(repr(fd['environment']))}")
                out.append(f"        {'transformers':<14} {escape(repr(fd['transformers']))}")
            if "id_offset" in fd:
                out.append(f"        ids from token {fd['id_offset']}: {env} {fd['environment_ids']}, transformers {fd['transformers_ids']}")
        cannot_r = next((r for r in sec.environments[env] if r.cannot is not None), None)
        if cannot_r is not None:
            out.append(f"      [yellow]not given: {escape(cannot_r.cannot or '')}[/]")
    return out
