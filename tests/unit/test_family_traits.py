"""One family model: what differs between families is data in their modules, read through
`Family.trait`; no rule, fix or verify code compares anything with a family's name."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from portkit.families import BY_NAME, FAMILIES
from portkit.families.traits import BatchMask, ContinuationMask, FamiliesWith, PaddingMask, Traits
from portkit.rules import RULES

TRAITS = {f.name.upper() for f in dataclasses.fields(Traits)}

ROOT = Path(__file__).resolve().parents[2]
NAMES = set(BY_NAME)
SHARED_CODE = [p for d in ("portkit/rules", "portkit/verify") for p in sorted((ROOT / d).rglob("*.py"))] + [
    ROOT / "portkit/fix.py"
]


def _name_comparisons(path: Path) -> list[str]:
    """`x == "qwen2"`, `x in ("llama", ...)`, `{"gemma": ...}.get(x)`-style lookups of family names."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            consts = [
                c
                for c in [node.left, *node.comparators]
                for c in ([c] if not isinstance(c, (ast.Tuple, ast.List, ast.Set)) else c.elts)
            ]
            if any(isinstance(c, ast.Constant) and c.value in NAMES for c in consts):
                out.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value in NAMES for k in node.keys):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return out


@pytest.mark.parametrize("path", SHARED_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_shared_code_branches_on_a_family_name(path: Path) -> None:
    assert _name_comparisons(path) == []


def test_the_scan_finds_a_branch() -> None:
    """Negative control: the scan sees the branches this issue removed."""
    probe = ROOT / "tests" / "unit" / "_branch_probe.py"
    try:
        probe.write_text(
            'def f(fam):\n    if fam.name == "llama":\n        return {"qwen2": 1}\n    return fam.name in ("gemma", '
            '"x")\n'
        )
        assert len(_name_comparisons(probe)) == 3
    finally:
        probe.unlink()


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_a_family_module_sets_only_known_traits(family: str) -> None:
    mod = BY_NAME[family].semantics
    upper = {k for k in vars(mod) if k.isupper() and not k.startswith("_")}
    # data other layers read directly: the serde mirror, and the sub-layers the porting kit names
    assert upper - set(TRAITS) <= {"FIELDS", "REQUIRED_FIELDS", "DEFAULT_ROPE_THETA", "SUBLAYERS", "TYPE_CHECKING"}, (
        upper - set(TRAITS)
    )
    # the values each `Literal` annotation of `Traits` allows (a typo in a family module is no trait)
    annotations = {f.name: str(f.type) for f in dataclasses.fields(Traits)}
    for name in ("lm_head", "sliding_window"):
        literal = ast.parse(annotations[name], mode="eval").body
        allowed = {n.value for n in ast.walk(literal) if isinstance(n, ast.Constant)}
        assert getattr(BY_NAME[family].traits, name) in allowed, (name, allowed)


def test_the_rules_families_agree_with_the_traits() -> None:
    fixed_head = {f.name for f in FAMILIES if f.traits.lm_head in ("always-loaded", "always-tied")}
    assert set(RULES["PK120"].families) == fixed_head
    windowed = {f.name for f in FAMILIES if f.traits.sliding_window is not None}
    assert set(RULES["PK115"].families) == windowed | {"phi3"}  # phi3's transformers windows, its candle never
    two_keys = {f.name for f in FAMILIES if len(f.traits.activation_keys) == 2}
    assert set(RULES["PK117"].families) == two_keys


def test_the_path_rules_families_agree_with_the_traits() -> None:
    """PK309-PK312 name exactly the families whose module sets the trait they read (their
    `families` is derived from the traits: this pins what the derivation gives today)."""

    def having(trait: str, how: str) -> set[str]:
        return {f.name for f in FAMILIES if getattr(getattr(f.traits, trait.lower()), "kind", None) == how}

    assert set(RULES["PK309"].families) == having("CONTINUATION_MASK", "prefix-in-model-dtype") == {"qwen2", "olmo2"}
    assert set(RULES["PK310"].families) == having("CONTINUATION_MASK", "rotating-window") == {"gemma3"}
    assert (
        set(RULES["PK311"].families)
        == having("BATCH_MASK", "undersized")
        == {"qwen3", "qwen3_moe", "smollm3", "glm4_new"}
    )
    assert set(RULES["PK312"].families) == having("PADDING_MASK", "bidirectional") == {"qwen2"}
    for f in FAMILIES:
        assert f.traits.batch_mask is None or f.traits.batch_mask.built in ("where-read", "always")


@pytest.mark.parametrize(
    "trait,record", [("CONTINUATION_MASK", ContinuationMask), ("BATCH_MASK", BatchMask), ("PADDING_MASK", PaddingMask)]
)
def test_a_path_trait_is_a_frozen_record_or_none(trait: str, record: type) -> None:
    """Every module's value of a path trait is None or that trait's frozen record, read by field
    name; verify asks only `family.traits.padding_mask is not None` (qwen2 alone)."""
    for f in FAMILIES:
        value = getattr(f.traits, trait.lower())
        assert value is None or type(value) is record, (f.name, value)
        if value is not None:
            assert value.source.startswith(f.source.removesuffix(".rs")), (f.name, value.source)
            with pytest.raises(dataclasses.FrozenInstanceError):
                value.kind = "other"  # type: ignore[misc]
    assert {f.name for f in FAMILIES if f.traits.padding_mask is not None} == {"qwen2"}


def test_the_derived_families_read_as_the_hand_written_tuples() -> None:
    """`FamiliesWith` is what the rule catalogue, the docs and `ctx.applies` read as `families`."""
    fams = RULES["PK309"].families
    assert isinstance(fams, FamiliesWith)
    assert fams == ("qwen2", "olmo2") and list(fams) == ["qwen2", "olmo2"] and len(fams) == 2 and fams[1] == "olmo2"
    assert "qwen2" in fams and "olmo2" in fams and "llama" not in fams and "*" not in fams and "nope" not in fams
    assert RULES["PK311"].families == ("qwen3", "qwen3_moe", "smollm3", "glm4_new") and RULES["PK312"].families == (
        "qwen2",
    )
    assert fams.of(BY_NAME["qwen2"]) == ContinuationMask("prefix-in-model-dtype", source="qwen2.rs:316-318")
    assert fams.of(BY_NAME["gemma3"]) is None and fams.of(None) is None  # gemma3's is of the other kind


def test_membership_imports_only_the_family_asked_about() -> None:
    """Linting a qwen2 config asks `"qwen2" in rule.families`: that reads qwen2's module alone
    (the registry loads a family's mirror when a config of it is linted, never all of them)."""
    import subprocess
    import sys

    prog = (
        "import sys\nfrom portkit.rules import RULES\nfrom portkit.families import BY_NAME\n"
        "mods = lambda: {m for m in sys.modules if m.removeprefix('portkit.families.') in BY_NAME}\nbefore = mods()\n"
        "assert 'qwen2' in RULES['PK309'].families and 'qwen3' in RULES['PK311'].families\n"
        "print(sorted(before), sorted(mods() - before))\n"
    )
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[] ['portkit.families.qwen2', 'portkit.families.qwen3']"
