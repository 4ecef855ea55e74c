"""One family model: what differs between families is data in their modules, read through
`Family.trait`; no rule, fix or verify code compares anything with a family's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from portkit.families import BY_NAME, FAMILIES, TRAITS
from portkit.rules import RULES

ROOT = Path(__file__).resolve().parents[2]
NAMES = set(BY_NAME)
SHARED_CODE = [p for d in ("portkit/rules", "portkit/verify") for p in sorted((ROOT / d).rglob("*.py"))] + [ROOT / "portkit/fix.py"]


def _name_comparisons(path: Path) -> list[str]:
    """`x == "qwen2"`, `x in ("llama", ...)`, `{"gemma": ...}.get(x)`-style lookups of family names."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            consts = [c for c in [node.left, *node.comparators] for c in ([c] if not isinstance(c, (ast.Tuple, ast.List, ast.Set)) else c.elts)]
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
        probe.write_text('def f(fam):\n    if fam.name == "llama":\n        return {"qwen2": 1}\n    return fam.name in ("gemma", "x")\n')
        assert len(_name_comparisons(probe)) == 3
    finally:
        probe.unlink()


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_a_family_module_sets_only_known_traits(family: str) -> None:
    mod = BY_NAME[family].semantics
    upper = {k for k in vars(mod) if k.isupper() and not k.startswith("_")}
    # data other layers read directly: the serde mirror, and the sub-layers the porting kit names
    assert upper - set(TRAITS) <= {"FIELDS", "REQUIRED_FIELDS", "DEFAULT_ROPE_THETA", "SUBLAYERS", "TYPE_CHECKING"}, upper - set(TRAITS)
    assert BY_NAME[family].trait("LM_HEAD") in ("flag", "always-loaded", "always-tied", "probed")
    assert BY_NAME[family].trait("SLIDING_WINDOW") in (None, "every-layer", "pattern", "unsupported")


def test_the_rules_families_agree_with_the_traits() -> None:
    fixed_head = {f.name for f in FAMILIES if f.trait("LM_HEAD") in ("always-loaded", "always-tied")}
    assert set(RULES["PK120"].families) == fixed_head
    windowed = {f.name for f in FAMILIES if f.trait("SLIDING_WINDOW") is not None}
    assert set(RULES["PK115"].families) == windowed | {"phi3"}  # phi3's transformers windows, its candle never
    two_keys = {f.name for f in FAMILIES if len(f.trait("ACTIVATION_KEYS")) == 2}
    assert set(RULES["PK117"].families) == two_keys


def test_the_path_rules_families_agree_with_the_traits() -> None:
    """PK309-PK312 name exactly the families whose module sets the trait they read."""

    def having(trait: str, how: str) -> set[str]:
        return {f.name for f in FAMILIES if (f.trait(trait) or (None,))[0] == how}

    assert set(RULES["PK309"].families) == having("CONTINUATION_MASK", "prefix-in-model-dtype") == {"qwen2", "olmo2"}
    assert set(RULES["PK310"].families) == having("CONTINUATION_MASK", "rotating-window") == {"gemma3"}
    assert set(RULES["PK311"].families) == having("BATCH_MASK", "undersized") == {"qwen3", "qwen3_moe"}
    assert set(RULES["PK312"].families) == having("PADDING_MASK", "bidirectional") == {"qwen2"}
    for f in FAMILIES:
        assert f.trait("BATCH_MASK") is None or f.trait("BATCH_MASK")[2] in ("where-read", "always")
