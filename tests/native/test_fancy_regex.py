"""The fancy-regex mirror (portkit/semantics/fancy_regex.py) against the crates themselves: every
ASCII letter escaped, in and out of a character class, in patterns of several shapes, loaded as a
`Split` by the wheel's tokenizers crate (candle 0.11.1's: 0.23.2, fancy-regex) and by candle 0.11.0's
(0.22.2, onig; its runner built from native/ on first use)."""

from __future__ import annotations

import json
import os
import string
import subprocess
import sys

from portkit.semantics.fancy_regex import refusal

PATTERNS = [
    p
    for letter in string.ascii_letters
    for p in (
        f"\\{letter}",
        f"a\\{letter}b",
        f"[\\{letter}]",
        f"[^a\\{letter}]",
        f"[]\\{letter}]",
        f"[[:alpha:]\\{letter}]",
        f"é\\{letter}",
        f"\\\\{letter}",
        f"[a]\\{letter}",
        f"(?:x|\\{letter})",
    )
]

#: loads each pattern (argv[1]: a JSON list) as a Split with the crate of the portkit_native on sys.path
LOADER = """
import json, sys
import portkit_native as pn
out = []
for pat in json.loads(sys.argv[1]):
    tj = {"version": "1.0", "added_tokens": [], "normalizer": None, "post_processor": None, "decoder": None,
          "pre_tokenizer": {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": False},
          "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}}
    try:
        pn.Tokenizer.from_str(json.dumps(tj))
        out.append(None)
    except Exception as e:
        out.append(str(e))
print(json.dumps(out))
"""


def _loaded(site: str | None) -> list[str | None]:
    env = {**os.environ, **({"PYTHONPATH": site} if site else {})}
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, json.dumps(PATTERNS)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(proc.stdout)


def test_the_mirror_says_what_fancy_regex_refuses() -> None:
    wrong = []
    for pattern, got in zip(PATTERNS, _loaded(None), strict=True):
        want = refusal(pattern)
        refused_for_escape = got is not None and "Invalid escape" in got
        if (want is None and refused_for_escape) or (want is not None and (got is None or want not in got)):
            wrong.append((pattern, want, got))
    assert not wrong, wrong[:10]
    assert sum(refusal(p) is not None for p in PATTERNS) > 100  # the letters fancy-regex does not know


def test_onig_reads_what_fancy_regex_refuses() -> None:
    """The fact is 0.11.1's: candle 0.11.0's crate (onig) loads the patterns the mirror flags, but for three
    letters onig gives a meaning of its own that wants more (\\c, \\C, \\M: control and meta codes)."""
    from portkit.verify.candle import release_build

    site = release_build.ensure("0.11.0", lambda _: None)
    flagged = [(p, got) for p, got in zip(PATTERNS, _loaded(str(site)), strict=True) if refusal(p) is not None]
    refused = sorted({p for p, got in flagged if got is not None})
    assert all(any(f"\\{c}" in p for c in "cCM") for p in refused), refused
    assert len(refused) < len(flagged) / 4
