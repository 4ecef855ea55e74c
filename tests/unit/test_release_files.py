"""The release files agree with each other: one version everywhere, `portkit[verify]` pinned to
the native wheel of that version, the release workflow building every platform the README
promises, and the README's install section as users and contributors need it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

import portkit

ROOT = Path(__file__).resolve().parents[2]


def _toml(path: str) -> dict:
    return tomllib.loads((ROOT / path).read_text())


def test_one_version_and_verify_pins_the_native_wheel_of_it() -> None:
    version = _toml("pyproject.toml")["project"]["version"]
    assert portkit.__version__ == version
    assert _toml("native/pyproject.toml")["project"]["version"] == version
    assert _toml("native/Cargo.toml")["package"]["version"] == version
    verify = _toml("pyproject.toml")["project"]["optional-dependencies"]["verify"]
    assert f"portkit-native=={version}" in verify, verify
    # lint stays pure Python: the native wheel, torch and transformers only with [verify]
    base = " ".join(_toml("pyproject.toml")["project"]["dependencies"])
    assert not re.search(r"portkit-native|torch|transformers", base)


def test_release_workflow_builds_linux_x86_64_aarch64_and_macos_arm64_with_metal() -> None:
    wf = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    targets = {row["target"] for row in wf["jobs"]["native"]["strategy"]["matrix"]["include"]}
    assert targets == {"x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "aarch64-apple-darwin"}
    # metal (and accelerate) come by target on macOS, so the plain build there has them
    mac = _toml("native/Cargo.toml")["target"]['cfg(target_os = "macos")']["dependencies"]
    assert all("metal" in mac[c]["features"] for c in ("candle-core", "candle-nn", "candle-transformers")), mac
    assert wf["jobs"]["publish"]["permissions"] == {"id-token": "write"}


def test_readme_install_section() -> None:
    text = (ROOT / "README.md").read_text()
    install = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "pip install portkit " in install and "pip install 'portkit[verify]'" in install
    contributing = text.split("## Contributing", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in contributing and "make test" in contributing


def test_make_installs_verify_with_the_locally_built_native_wheel() -> None:
    make = (ROOT / "Makefile").read_text()
    assert "--find-links $(CARGO_TARGET_DIR)/wheels -e '.[verify,test,plot]'" in make
    assert re.search(r"^test: native dist$", make, re.M) and "tests/release/no_cargo_install.sh $(DIST)" in make
    assert "actionlint .github/workflows/*.yml" in make
