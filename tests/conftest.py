"""Session-wide pytest fixtures exposing portkit's generated model fixtures.

Fixture directories live in the shared cache (`fixtures.cache`, `$PORTKIT_CACHE`): treat
them as read-only and copy one (`shutil.copytree`) before editing it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI (the runner sets CI=true) draws the same examples on every run, so a failure there can
# be reproduced; print_blob shows the @reproduce_failure line for whatever it finds.
# Locally, examples stay random and keep exploring.
# Generation speed is the machine's load, not the code's: a busy 2-core runner is no failure.
settings.register_profile(
    "ci", derandomize=True, print_blob=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")

# `fixtures/` is a top-level package of the repository, not of the installed `portkit`.
_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))


@pytest.fixture(scope="session")
def fixture_dir() -> Callable[..., Path]:
    """`fixture_dir(variant, seed=0) -> Path`: a generated fixture (see fixtures.variants)."""
    from fixtures.cache import fixture_dir as _fixture_dir

    return _fixture_dir


@pytest.fixture(scope="session")
def gguf_file() -> Callable[..., Path]:
    """`gguf_file(variant="healthy-tied", seed=0, qtype="f32", **write_gguf_kwargs) -> Path`."""
    from fixtures.cache import gguf_file as _gguf_file

    return _gguf_file


@pytest.fixture(scope="session")
def healthy_tied_dir(fixture_dir: Callable[..., Path]) -> Path:
    return fixture_dir("healthy-tied")


@pytest.fixture(scope="session")
def healthy_untied_dir(fixture_dir: Callable[..., Path]) -> Path:
    return fixture_dir("healthy-untied")


@pytest.fixture(scope="session")
def llama_port() -> Path:
    """native/portkit-dump's example port (`cargo build --release --examples` once, in the shared
    CARGO_TARGET_DIR, as the Makefile sets): tests/native/test_portkit_dump.py on a generated
    fixture, tests/real on the real checkpoint."""
    if shutil.which("cargo") is None:
        pytest.fail("cargo is needed to build native/portkit-dump (the README's set-up installs it)")
    target = Path(os.environ.get("CARGO_TARGET_DIR") or Path.home() / ".cache" / "portkit" / "target")
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    subprocess.run(
        ["cargo", "build", "--release", "--examples", "--quiet"],
        cwd=_ROOT / "native" / "portkit-dump",
        env=env,
        check=True,
    )
    exe = target / "release" / "examples" / "llama_port"
    assert exe.is_file()
    return exe
