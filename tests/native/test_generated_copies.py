"""The capture copies (native/src/*_copy.rs) are candle-transformers 0.11.1's own files plus a
patch (native/copies/<name>.patch): `native/copies/generate.py --check` regenerates each one from
cargo's registry and fails on any difference, so a copy cannot drift from candle's text unseen.
The negative controls show the check does see a changed copy, a changed original and a missing
registry. Needs cargo's registry to hold candle-transformers-0.11.1 (any build of native/ puts it
there: make native / make test); without it these tests fail, they do not skip."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "native" / "copies" / "generate.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("portkit_native_copies_generate", SCRIPT)
    assert spec is not None and spec.loader is not None, SCRIPT
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen = _load()


@pytest.fixture(scope="module")
def models() -> Path:
    try:
        return gen.registry_models_dir()
    except gen.RegistryMissing as e:
        pytest.fail(f"{e} -- the generated-copy check needs candle's source; build native/ first")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def test_check_passes_on_the_tree(models: Path) -> None:
    r = _run("--check")
    assert r.returncode == 0, f"generate.py --check exited {r.returncode}:\n{r.stderr}\n{r.stdout[-6000:]}"
    assert f"{len(gen.NAMES)} copies match" in r.stdout


def test_every_copy_is_generated() -> None:
    on_disk = {p.name.removesuffix("_copy.rs") for p in (ROOT / "native" / "src").glob("*_copy.rs")}
    assert on_disk == set(gen.NAMES), "every native/src/*_copy.rs needs a patch in native/copies/ and a place in NAMES"
    for name in gen.NAMES:
        assert gen.patch_path(name).is_file(), name
        assert gen.read(gen.copy_path(name)).startswith(gen.header(name)), (
            f"{name}_copy.rs lacks the generated-file header"
        )


def test_the_patches_import_array_and_sink_not_llama() -> None:
    for name in (
        n for n in gen.NAMES if n not in gen.OUTSIDE_MODELS and n not in gen.REPAIRS
    ):  # the capture copies (generation: the sampler)
        text = gen.read(gen.copy_path(name))
        assert "use crate::array::Array;" in text and "use crate::sublayers::Sink;" in text, name
        assert "crate::llama::" not in text, name


def _tree_copy(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    for name in gen.NAMES:
        shutil.copy(gen.copy_path(name), src)
    return src


def test_a_changed_copy_is_reported(models: Path, tmp_path: Path) -> None:
    src = _tree_copy(tmp_path)
    path = gen.copy_path("qwen3", src)
    text = gen.read(path)
    line = next(line for line in text.splitlines() if "repeat_kv" in line)  # candle's text, not a capture point
    gen.write(path, text.replace(line, line + "  // edited by hand", 1))
    assert gen.check(gen.NAMES, models, src).keys() == {"qwen3"}
    diff = gen.check(["qwen3"], models, src)["qwen3"]
    assert f"-{line}  // edited by hand" in diff and f"+{line}" in diff, diff

    r = _run("--check", "--src-dir", str(src))
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "edited by hand" in r.stdout and "qwen3" in r.stderr, r.stderr


def test_a_changed_original_is_reported(models: Path, tmp_path: Path) -> None:
    reg = tmp_path / "models"
    reg.mkdir()
    for name in gen.NAMES:
        dst = reg.parent / gen.source_of(name)
        dst.parent.mkdir(exist_ok=True)
        shutil.copy(models.parent / gen.source_of(name), dst)
    # A line candle's file keeps unchanged in the copy: the generated copy differs from the tree's
    # (or, in a hunk's context, the patch refuses).
    original = gen.read(reg / "gemma2.rs")
    kept = [
        line
        for line in original.splitlines()
        if "fn forward" in line and line in gen.read(gen.copy_path("gemma2")).splitlines()
    ]
    assert kept
    gen.write(reg / "gemma2.rs", original.replace(kept[-1], kept[-1] + " ", 1))
    # A line the patch removes: the patch no longer applies, and says where.
    patch = gen.read(gen.patch_path("llama"))
    removed = next(
        line[1:]
        for line in patch.splitlines()
        if line.startswith("-") and not line.startswith("---") and line[1:].strip()
    )
    original = gen.read(reg / "llama.rs")
    gen.write(reg / "llama.rs", original.replace(removed, removed + " // changed upstream", 1))
    with pytest.raises(gen.PatchError, match="does not match"):
        gen.generate("llama", reg)

    found = gen.check(gen.NAMES, reg)
    assert found.keys() == {"gemma2", "llama"}, found.keys()
    assert "cannot be generated" in found["llama"] and "changed upstream" in found["llama"]
    r = _run("--check", "--registry", str(reg))
    assert r.returncode == 1 and "gemma2, llama" in r.stderr, r.stderr


def test_missing_registry_is_a_one_line_error(tmp_path: Path) -> None:
    env = dict(os.environ, CARGO_HOME=str(tmp_path / "cargo"))
    r = _run("--check", env=env)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "candle-transformers-0.11.1" in r.stderr and "make native" in r.stderr, (
        r.stderr
    )
    with pytest.raises(gen.RegistryMissing):
        gen.registry_models_dir(tmp_path / "cargo")


@pytest.mark.parametrize(
    ("original", "copy"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb\nc", "a\nb\nc\n"),  # a final newline gained
        ("a\nb\nc\n", "a\nb\nc"),  # and lost
        ("", "x\n"),
        ("x\n", ""),
        ("".join(f"{i}\n" for i in range(40)), "head\n" + "".join(f"{i}\n" for i in range(40) if i % 13) + "tail\n"),
    ],
)
def test_make_patch_and_apply_patch_round_trip(original: str, copy: str) -> None:
    patch = gen.make_patch("x", original, copy)
    assert gen.apply_patch(original, patch) == copy, patch


def test_apply_patch_refuses_a_shifted_context() -> None:
    original = "".join(f"{i}\n" for i in range(20))
    patch = gen.make_patch("x", original, original.replace("10\n", "ten\n"))
    with pytest.raises(gen.PatchError, match="does not match"):
        gen.apply_patch("extra\n" + original, patch)  # patch(1) would apply at an offset; this refuses
    with pytest.raises(gen.PatchError, match="counts"):
        gen.apply_patch(original, patch.replace("+ten\n", "+ten\n+more\n"))  # the hunk's counts are wrong
    with pytest.raises(gen.PatchError, match="counts"):
        gen.apply_patch(original, patch.replace("+ten\n", "+ten\n+more\n") + "@@ -20,0 +21,1 @@\n+end\n")


def _body(patch: str) -> list[str]:
    """A patch's lines without the two that name the crate (`--- ` and the generated header)."""
    return [ln for ln in patch.splitlines()[1:] if "@generated by" not in ln]


def test_a_release_without_its_own_patch_takes_the_nearest_later_releases() -> None:
    """0.9.2's llama.rs is 0.10.0's byte for byte: with no native/copies/0.9.2/llama.patch it takes 0.10.0's
    (the nearest later release with one, before the default's), its generated header naming 0.9.2's crate."""
    dirs = [gen.release_of(d) or "default" for d in gen.fallbacks("0.9.2")]
    assert dirs[-1] == "default" and dirs[:-1] == sorted(dirs[:-1], key=gen._key), dirs
    assert dirs[0] == "0.10.0" and dirs[-2] == "0.11.0" and "0.11.1" not in dirs, dirs
    try:
        gen.for_release("0.9.2")
        text = gen.patch_text("llama", gen.HERE / "0.9.2")
        assert "from candle-transformers-0.9.2's src/models/llama.rs" in text, text[:400]
        assert _body(text) == _body(gen.read(gen.HERE / "0.10.0" / "llama.patch"))
        assert _body(gen.patch_text("bert", gen.HERE / "0.9.2")) == _body(gen.read(gen.HERE / "0.11.0" / "bert.patch"))
        assert _body(gen.patch_text("gemma", gen.HERE / "0.9.2")) == _body(gen.read(gen.patch_path("gemma")))
    finally:
        gen.for_release(gen.RELEASE)


def test_a_file_the_release_lacks_gets_no_copy(tmp_path: Path) -> None:
    """A registry crate without models/qwen3.rs (0.9.1): generate.py --release writes every other copy and none of
    qwen3's; without --release a missing original is still an error."""
    crate = tmp_path / "candle-transformers-9.9.9" / "src"
    (crate / "models").mkdir(parents=True)
    (crate / "lib.rs").write_text("")
    (crate / "models" / "qwen2.rs").write_text("")
    assert gen.absent("qwen3", crate / "models") and not gen.absent("qwen2", crate / "models")
    out = tmp_path / "out"
    out.mkdir()
    r = _run("--release", "9.9.9", "--registry", str(crate / "models"), "--src-dir", str(out), "qwen3")
    assert r.returncode == 0 and "no copy of qwen3" in r.stdout and not list(out.iterdir()), (r.stdout, r.stderr)
    r = _run("--registry", str(crate / "models"), "--src-dir", str(out), "qwen3")
    assert r.returncode == 2 and "qwen3.rs is missing" in r.stderr, (r.stdout, r.stderr)
