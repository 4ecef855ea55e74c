"""The GGUF rule effects quoted in docs/measurements.md ("Rule effects"), on generated fixtures.

    python bench/gguf_rule_effects.py

Writes each family fixture's GGUF (llama.cpp's converter layout, `fixtures.gguf_writer`) and
prints `portkit verify --gguf`'s last-position comparison: qwen3 as converted (no
`general.dtype`, PK412) and with `general.dtype = 0`, gemma3 through quantized_gemma3 (PK413).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures.families import family_fixture  # noqa: E402
from fixtures.gguf_writer import write_gguf  # noqa: E402
from portkit.verify.pipeline import VerifyOptions, verify  # noqa: E402

CASES = [
    ("PK412", "qwen3", None),
    ("PK412 control", "qwen3", {"general.dtype": 0}),
    ("PK413", "gemma3", None),
]


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="portkit-gguf-effects-"))
    for label, family, override in CASES:
        d = family_fixture(family, "legacy")
        gguf = write_gguf(d, work / f"{family}-{len(label)}.gguf", override=override)
        rep = verify(VerifyOptions(model_dir=d, gguf=gguf, layers=False, cache=False))
        c = rep.gguf.comparison if rep.gguf else None
        print(f"{label:14} {family:7} {override or 'as converted'}: {c.headline() if c else rep.gguf.run.failure}")


if __name__ == "__main__":
    main()
