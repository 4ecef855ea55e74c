"""Another candle release's runner, built on first use with the user's own cargo.

The portkit-native wheel is built on `candle_release.NATIVE`. verify judges a release by running
that release's own crates from crates.io, never an imitation, so for another runnable release
(`candle_release.RUNNABLE`) it builds the same crate (`native/`) against it:

- native/Cargo.toml with every `=NATIVE` candle pin (and the `tokenizers` crate that release's
  candle-core depends on) swapped for the release's, and `native/releases/<R>/Cargo.lock`, the
  lock that release was tested with (`cargo build --locked`: the versions are the tested ones);
- the capture copies generated from that release's own source (`native/copies/generate.py
  --release R`, its own patches in `native/copies/<R>/`, else a later release's);
- the cargo features (`FEATURES`) that leave out the modules the release does not have yet (0.9.1 has no
  qwen3.rs; verify refuses such a checkpoint before building, `portkit.verify.cli.absent_module`);
- cargo's output assembled as an importable `portkit_native` package.

The result is cached under `$PORTKIT_CACHE/native/<R>-<digest>/`, keyed by the release and the
digest of the native source it was built from (a new portkit builds again). A failed build leaves
nothing behind and ends verify with cargo's last error line.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from portkit.candle_release import FANCY_REGEX, NATIVE, RUNNABLE, TOKENIZERS_CRATE
from portkit.verify import cachefiles
from portkit.verify.errors import BadInput

#: the crate verify's runner is built from: the repository's native/ next to the package
NATIVE_SOURCE = Path(__file__).resolve().parents[3] / "native"
#: what the build reads from native/ (the digest keys a build by these)
SOURCE_PARTS = ("Cargo.toml", "build.rs", "src", "python", "copies", "releases")


def _regex_engine(release: str) -> str:
    return "fancy-regex" if FANCY_REGEX.holds(release) else "onig"


#: the `tokenizers` requirement each release's candle-core resolves (`portkit.candle_release.TOKENIZERS_CRATE`,
#: with the regex engine its Cargo.toml asks for, default features off)
TOKENIZERS = {
    release: f'"={crate}", default-features = false, features = ["{_regex_engine(release)}"]'
    for release, crate in TOKENIZERS_CRATE.items()
}

#: the `safetensors` the release's candle-core reads checkpoints with (its Cargo.toml: 0.4 in 0.9.1, 0.7
#: from 0.9.2 to 0.10.2, 0.8 from 0.11.0): native/src/weights.rs hands candle that crate's views
SAFETENSORS = {
    "0.9.1": '"=0.4.5"',
    "0.9.2": '"=0.7.0"',
    "0.10.0": '"=0.7.0"',
    "0.10.1": '"=0.7.0"',
    "0.10.2": '"=0.7.0"',
    "0.11.0": '"=0.8.0"',
    "0.11.1": '"=0.8.0"',
}

#: native/'s cargo features that leave out the candle modules a release lacks (native/Cargo.toml): nomic_bert
#: arrived in 0.10.0, qwen3, qwen3_moe, olmo2, smollm3 and glm4_new in 0.9.2
FEATURES = {
    "0.9.1": ("before-0-9-2",),
    "0.9.2": ("before-0-10-0",),
    "0.10.0": ("before-0-11-0",),
    "0.10.1": ("before-0-11-0",),
    "0.10.2": ("before-0-11-0",),
}


def site_root() -> Path:
    return cachefiles.cache_base() / "native"


def source_digest(source: Path = NATIVE_SOURCE) -> str:
    h = hashlib.sha256()
    for part in SOURCE_PARTS:
        root = source / part
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for f in files:
            if "target" in f.relative_to(source).parts or f.suffix in (".so", ".pyc"):
                continue
            h.update(str(f.relative_to(source)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def manifest_for(text: str, release: str) -> str:
    """native/Cargo.toml's text with the candle pins and the tokenizers requirement of `release`."""
    out = text.replace(f'"={NATIVE}"', f'"={release}"')
    out = out.replace(f"safetensors = {SAFETENSORS[NATIVE]}", f"safetensors = {SAFETENSORS[release]}")
    return out.replace(TOKENIZERS[NATIVE], TOKENIZERS[release])


def built_dir(release: str, source: Path = NATIVE_SOURCE) -> Path:
    return site_root() / f"{release}-{source_digest(source)}"


def ensure(release: str, progress: Callable[[str], None], source: Path = NATIVE_SOURCE) -> Path:
    """The directory to put on sys.path for `release`'s `portkit_native`, built now if not cached."""
    if release not in RUNNABLE or release == NATIVE:
        raise BadInput(f"verify runs candle {', '.join(RUNNABLE)}; {release} is not one")
    if not (source / "Cargo.toml").is_file() or not (source / "releases" / release / "Cargo.lock").is_file():
        raise BadInput(
            f"candle {release}'s runner is built from portkit's native/ crate, which this installation does not have; "
            f"verify it from a portkit source checkout, or use `--candle {NATIVE}`"
        )
    done = built_dir(release, source)
    if (done / "portkit_native" / "_native.abi3.so").is_file():
        return done
    cargo = shutil.which("cargo")
    if cargo is None:
        raise BadInput(
            f"candle {release}'s runner is built on first use with cargo, and cargo is not on PATH (https://rustup.rs)"
        )
    work = site_root() / f".build-{release}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        crate = work / "crate"
        _copy_crate(source, crate, release)
        target_dir = site_root() / f"target-{release}"
        env = {**os.environ, "PYO3_PYTHON": sys.executable, "CARGO_TARGET_DIR": str(target_dir)}
        progress(f"building candle {release}'s runner with cargo (first use; minutes, then cached in {site_root()})")
        _run([cargo, "fetch", "--locked"], crate, env, release)
        _run(
            [
                sys.executable,
                str(crate / "copies" / "generate.py"),
                "--release",
                release,
                "--src-dir",
                str(crate / "src"),
                "--patch-dir",
                str(crate / "copies" / release),
            ],
            crate,
            env,
            release,
        )
        features = ",".join(("extension-module", *FEATURES.get(release, ())))
        _run([cargo, "build", "--release", "--lib", "--locked", "--features", features], crate, env, release)
        package = work / "site" / "portkit_native"
        shutil.copytree(crate / "python" / "portkit_native", package)
        shutil.copy2(_library(target_dir), package / "_native.abi3.so")
        shutil.rmtree(done, ignore_errors=True)
        (work / "site").rename(done)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return done


def _copy_crate(source: Path, crate: Path, release: str) -> None:
    ignore = shutil.ignore_patterns("target", "*.so", "__pycache__", "portkit-dump", "examples", "tests")
    # fresh mtimes: cargo's fingerprints of a path crate do not name its directory, and a copy keeping an
    # older mtime than the last build in the shared target dir would not be rebuilt
    shutil.copytree(source, crate, ignore=ignore, copy_function=shutil.copy)
    manifest = crate / "Cargo.toml"
    manifest.write_text(manifest_for(manifest.read_text(encoding="utf-8"), release), encoding="utf-8")
    shutil.copy2(source / "releases" / release / "Cargo.lock", crate / "Cargo.lock")
    config = source.parent / ".cargo" / "config.toml"  # the CPU level the wheel is built for
    if config.is_file():
        (crate / ".cargo").mkdir()
        shutil.copy2(config, crate / ".cargo" / "config.toml")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], release: str) -> None:
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error")]
        # cargo's own error, not its closing "could not compile ... due to N previous errors"
        last = next(
            (ln for ln in reversed(errors) if "could not compile" not in ln),
            errors[-1] if errors else lines[-1] if lines else f"exit {proc.returncode}",
        )
        raise BadInput(
            f"building candle {release}'s runner failed ({Path(cmd[1]).name if cmd[0] == sys.executable else cmd[1]}): "
            f"{last}"
        )


def _library(target_dir: Path) -> Path:
    names = {"linux": "libportkit_native.so", "darwin": "libportkit_native.dylib"}
    name = names.get(sys.platform, "portkit_native.dll")
    return target_dir / "release" / name


def activate(path: Path) -> None:
    """Import `portkit_native` from `path` from now on (before anything imported the wheel's)."""
    if "portkit_native" in sys.modules and not str(Path(sys.modules["portkit_native"].__file__ or "")).startswith(
        str(path)
    ):
        raise BadInput("portkit_native was imported before the release's runner could be chosen")
    sys.path.insert(0, str(path))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(path), *filter(None, [os.environ.get("PYTHONPATH")])])
