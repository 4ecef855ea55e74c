"""The text report's lines for verify's sections (rich markup): the tokens section with its chat
templates, and the paths (a second turn, a batch). The sections compose and judge; what they
print lives here."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape

from portkit.verify.sections.chat_templates import TemplateSection, first_difference
from portkit.verify.sections.paths import TITLES, PathsReport
from portkit.verify.sections.tokens import TokenizerSection

#: how each verdict is coloured, in every section
VERDICT_STYLE = {
    "CONFIRMED": "bold red",
    "CRASH-CONFIRMED": "bold red",
    "NOT-REPRODUCED": "yellow",
    "NOT-REACHED": "dim",
    "NOT-PROBED": "dim",
}


def _ids(ids: Sequence[int], k: int = 16) -> str:
    return "[" + ", ".join(str(i) for i in ids[:k]) + (f", ... {len(ids) - k} more]" if len(ids) > k else "]")


def _pieces(pieces: Sequence[str], k: int = 16) -> str:
    shown = " ".join(repr(p)[1:-1] for p in pieces[:k])
    return shown + (f" ... {len(pieces) - k} more" if len(pieces) > k else "")


def tokens_lines(sec: TokenizerSection) -> list[str]:
    """The section as rich markup lines (verify's text report prints them first)."""
    out = [f"[bold]tokens: candle vs transformers[/] {escape(str(sec.path))}"]
    out.append(
        "  candle: tokenizers crate 0.22.2 on tokenizer.json; transformers: "
        f"{escape(sec.transformers_class or 'not loaded')}"
    )
    if sec.crate_error:
        out.append(f"  [red]the tokenizers crate cannot load tokenizer.json: {escape(sec.crate_error)}[/]")
    if sec.transformers_error:
        out.append(f"  [yellow]{escape(sec.transformers_error)}[/]: nothing to compare")
    if sec.encodes:
        texts = len({e.sample.text for e in sec.encodes})
        diff = sec.differing
        mark = "[green]OK[/]" if not diff else "[red]MISMATCH[/]"
        chat = " incl. the chat template" if sec.chat_text else f" ({escape(sec.chat_note or 'no chat template')})"
        out.append(
            f"  corpus   {texts} texts{chat}, with and without special tokens: {len(diff)} of {len(sec.encodes)} "
            f"encodes differ  {mark}"
        )
        first = sec.first
        if first is not None:
            shown = first.sample.text if len(first.sample.text) <= 70 else first.sample.text[:67] + "..."
            out.append(f"  first    {escape(repr(shown))} (special tokens {'on' if first.special else 'off'})")
            out.append(f"    candle        {_ids(first.crate)}  {escape(_pieces(first.crate_pieces))}")
            out.append(f"    transformers  {_ids(first.transformers)}  {escape(_pieces(first.transformers_pieces))}")
        d = len(sec.decode_differs)
        out.append(f"  decode   transformers' ids decoded on both sides: {d} of {sec.decodes} differ")
        if sec.decode_differs:
            text, ids, a, b = sec.decode_differs[0]
            out.append(f"    candle {escape(repr(a[:70]))}  transformers {escape(repr(b[:70]))}")
    if sec.templates is not None:
        out += template_lines(sec.templates)
    return out


def template_lines(sec: TemplateSection) -> list[str]:
    """The section as rich markup lines (under verify's tokens section)."""
    skipped = len(sec.conversations) - len(sec.compared())
    head = (
        f"  template {len(sec.conversations)} conversations"
        + (f" ({skipped} transformers refuses)" if skipped else "")
        + f", {escape(sec.source)}"
    )
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
                out.append(
                    f"        ids from token {fd['id_offset']}: {env} {fd['environment_ids']}, transformers "
                    f"{fd['transformers_ids']}"
                )
        cannot_r = next((r for r in sec.environments[env] if r.cannot is not None), None)
        if cannot_r is not None:
            out.append(f"      [yellow]not given: {escape(cannot_r.cannot or '')}[/]")
    return out


def paths_lines(rep: PathsReport) -> list[str]:
    """The report's section (rich markup), after the prompt's and the GGUF's."""
    out: list[str] = []
    for sec in rep.sections:
        for c in sec.checks:
            out.append("")
            out.append(f"[bold]{TITLES[c.path.name]}[/] ({escape(sec.subject)}): {escape(c.path.description)}")
            colour = "green" if c.ok else "red"
            out.append(f"  [{colour}]{escape(c.headline())}[/]")
            if c.path.control_failure is not None:
                out.append(f"  [dim]{escape(c.path.control_word)}: {escape(c.path.control_failure.line())}[/]")
            if c.control_vs_reference is not None and c.path.run.failure is not None:
                out.append(
                    f"  {escape(c.path.control_word)} vs transformers: "
                    f"{escape(c.control_vs_reference.headline() or 'agrees')}"
                )
        for name, why in sec.not_run.items():
            if name == "padded-batch" and not sec.findings:
                continue
            out.append(f"  [dim]{name}: not run ({escape(why)})[/]")
        if sec.findings:
            out.append(f"  findings on these runs ({escape(sec.subject)}, portkit lint: {len(sec.findings)})")
            for f in sec.findings:
                out.append(
                    f"    [bold]{f.code}[/] {f.name}  [{VERDICT_STYLE[f.verdict]}]{f.verdict}[/]  "
                    f"[dim]({f.probe_kind})[/]"
                )
                out.append(f"        {escape(f.message)}")
                out.append(f"        evidence: {escape(f.evidence)}")
    return out
