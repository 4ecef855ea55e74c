"""VerifyOptions: `--gguf` given once or several times reads the same way (the first is `gguf`)."""

from __future__ import annotations

from pathlib import Path

from portkit.verify.options import DEFAULT_TOKENS, VerifyOptions


def test_the_first_of_several_ggufs_is_the_gguf() -> None:
    o = VerifyOptions(model_dir=Path("m"), ggufs=("a.gguf", "b.gguf"))
    assert o.gguf == Path("a.gguf") and o.ggufs == (Path("a.gguf"), Path("b.gguf"))


def test_one_gguf_is_the_whole_ladder_and_none_is_none() -> None:
    o = VerifyOptions(model_dir=Path("m"), gguf=Path("q.gguf"))
    assert o.ggufs == (Path("q.gguf"),)
    n = VerifyOptions(model_dir=Path("m"))
    assert n.gguf is None and n.ggufs == () and n.tokens == DEFAULT_TOKENS == 8
