"""`portkit rules`: the rule catalogue as a table that fits 100 columns, or as JSON.

One row per code, in code order. `--group` and `--family` filter; removed codes (kept in the
append-only code table forever) are listed only with `--all`. A rule's families are "all" when
it speaks about every family, never the whole list again on every row; `portkit explain CODE`
has the full list and the rule's doc.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

    from portkit.rules.base import Rule

WIDTH = 100
# (header, width) of the fixed columns; "families" takes what is left of WIDTH
_COLUMNS = (("code", 5), ("fix", 3), ("name", 33), ("group", 9), ("severity", 8), ("verify", 7), ("status", 7))
# the probe verify runs; "none": static-only, reported NOT-PROBED with the rule's reason
_VERIFY = {
    "numeric": "numeric",
    "crash": "crash",
    "static-only": "none",
    "tokens": "tokens",
    "template": "render",
    "sampling": "sampling",
}


def groups() -> list[str]:
    """The rule groups, in code order (config, weights, runtime, gguf, ...)."""
    from portkit.rules import RULES

    return list(dict.fromkeys(r.group for r in RULES.values()))


def families_short(rule: Rule) -> tuple[str, list[str]]:
    """(prefix, names) a rule's row shows: "all", "any" (every model type, even one candle has
    no module for), or the families; a GGUF rule's loaders as "gguf:" and their names without
    `quantized_`."""
    from portkit.families import BY_NAME

    loaders = getattr(rule, "loaders", None)
    if loaders:
        every_loader = {f.gguf_loader for f in BY_NAME.values() if f.gguf_loader}
        return (
            ("", ["all"])
            if set(loaders) >= every_loader
            else ("gguf:", [name.removeprefix("quantized_") for name in loaders])
        )
    if "*" in rule.families:
        return "", ["any"]
    if set(rule.families) >= set(BY_NAME):
        return "", ["all"]
    return "", list(rule.families)


def speaks_about(rule: Rule, family: str) -> bool:
    """Whether `rule` applies to a model of `family`: its config rules, or the GGUF rules of the
    loader that family's GGUF files go through."""
    from portkit.families import BY_NAME

    loaders = getattr(rule, "loaders", None)  # a GGUF rule's (`GgufRule.loaders`)
    if loaders:
        return BY_NAME[family].gguf_loader in loaders
    return "*" in rule.families or family in rule.families


def rows(
    group: str | None = None, family: str | None = None, include_removed: bool = False, candle: str | None = None
) -> list[dict[str, Any]]:
    """The catalogue's rows; `candle`: only the rules whose fact holds for that release."""
    from portkit.rules import CODES, RULES

    out: list[dict[str, Any]] = []
    for code, (name, status) in CODES.items():
        r = RULES.get(code)
        if r is None:  # a removed code: no rule, no group, no family
            if include_removed and group is None and family is None:
                out.append(
                    dict(
                        code=code,
                        name=name,
                        status=status,
                        group=None,
                        families=[],
                        severity=None,
                        effect=None,
                        fix=None,
                        probe=None,
                        summary="",
                    )
                )
            continue
        if (group is not None and r.group != group) or (family is not None and not speaks_about(r, family)):
            continue
        if candle is not None and not r.holds.holds(candle):
            continue
        out.append(
            dict(
                code=code,
                name=name,
                status=status,
                group=r.group,
                families=list(r.families),
                severity=r.severity,
                effect=r.effect,
                fix=r.fix_availability,
                probe=r.probe_kind,
                summary=r.summary(),
            )
        )
    return out


def _fit(names: list[str], width: int) -> str:
    """Comma-joined names, the tail as "+N" when they do not fit."""
    text = ",".join(names)
    if len(text) <= width:
        return text
    for k in range(len(names) - 1, 0, -1):
        text = ",".join(names[:k]) + f" +{len(names) - k}"
        if len(text) <= width:
            return text
    return f"{len(names)} families"


def render_text(table: list[dict[str, Any]], width: int = WIDTH) -> str:
    from portkit.rules import RULES

    fixed = sum(w for _, w in _COLUMNS) + 2 * len(_COLUMNS)
    fam_width = width - fixed
    lines = ["  ".join(h.ljust(w) for h, w in _COLUMNS) + "  families"]
    for row in table:
        rule = RULES.get(row["code"])
        cells = (
            row["code"],
            "[*]" if row["fix"] in ("always", "sometimes") else "",
            row["name"],
            row["group"] or "",
            row["severity"] or "",
            _VERIFY.get(row["probe"] or "", ""),
            "" if row["status"] == "stable" else row["status"],
        )
        line = "  ".join(c.ljust(w) for c, (_, w) in zip(cells, _COLUMNS, strict=False))
        prefix, names = families_short(rule) if rule is not None else ("", [])
        fams = prefix + _fit(names, fam_width - len(prefix)) if names else ""
        lines.append((line + "  " + fams).rstrip())
    lines.append("")
    lines.append(f"{len(table)} rules. [*]: `portkit fix` can fix it. all: every family; any: every model type.")
    lines.append("verify: the probe `portkit verify` runs; none: nothing to run, reported NOT-PROBED with why.")
    lines.append("`portkit explain CODE` prints a rule's doc and its families; --group, --family and --all filter.")
    return "\n".join(lines) + "\n"
