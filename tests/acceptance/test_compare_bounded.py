"""compare's memory follows the reference, never what a candidate claims.

A candidate's safetensors header is checked against the reference before any tensor data is
read, so a 4 KB sparse file that declares 1 GiB of logits is refused at the cost of reading its
header; a JSON candidate (parsed whole) is refused by its size when it is larger than the
reference's values could be as text.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _st(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, off, body = {}, 0, b""
    for k, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[k] = {
            "dtype": {"float32": "F32", "int64": "I64"}[str(a.dtype)],
            "shape": list(a.shape),
            "data_offsets": [off, off + len(raw)],
        }
        off, body = off + len(raw), body + raw
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + body)


def _sparse(path: Path, name: str, shape: list[int]) -> None:
    n = int(np.prod(shape))
    h = json.dumps({name: {"dtype": "F32", "shape": shape, "data_offsets": [0, 4 * n]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + 4 * n)


def peak_rss_mb(*argv: str) -> tuple[int, str, float]:
    """(exit code, stderr, peak RSS in MiB) of `portkit ARGV`, measured by a parent of its own."""
    prog = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-m', 'portkit', *sys.argv[1:]], capture_output=True, text=True)\n"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stderr.write(r.stderr)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    p = subprocess.run([sys.executable, "-c", prog, *argv], capture_output=True, text=True, env=env, timeout=300)
    code, kb = p.stdout.split()
    return int(code), p.stderr, int(kb) / 1024


def test_a_sparse_candidate_claiming_1_gib_is_refused_reading_its_header_only(tmp_path: Path) -> None:
    ref = tmp_path / "ref.safetensors"
    _st(ref, {"ids": np.arange(3, dtype=np.int64), "logits": np.ones((3, 4), np.float32)})
    for name, shape in (("logits", [2**28]), ("layer.0", [2**14, 2**14]), ("greedy", [2**27])):
        cand = tmp_path / f"{name}.safetensors"
        _sparse(cand, name, shape)
        assert cand.stat().st_blocks * 512 < 64 * 1024  # nothing written: only the header is real
        code, err, mb = peak_rss_mb("compare", str(ref), str(cand))
        assert code == 2 and err.startswith(f"portkit: error: {cand}: "), err
        # Python, numpy and rich are ~60 MiB; reading the claimed tensor was 2.1 GB (issue 20)
        assert mb < 250, (name, mb)


def test_a_candidate_as_large_as_the_reference_is_still_read(tmp_path: Path) -> None:
    """The negative control: the bound is the reference's size, not a fixed small number."""
    ref, cand = tmp_path / "ref.safetensors", tmp_path / "cand.safetensors"
    logits = np.random.default_rng(0).standard_normal((4, 2**18), dtype=np.float32)  # 4 MiB
    _st(ref, {"logits": logits})
    _st(cand, {"logits": logits})
    code, err, _ = peak_rss_mb("compare", str(ref), str(cand))
    assert code == 0, err
    bumped = logits.copy()
    bumped[-1, 0] += 1e-3
    _st(cand, {"logits": bumped})
    code, err, _ = peak_rss_mb("compare", str(ref), str(cand))
    assert code == 1, err


def test_a_json_candidate_larger_than_the_reference_could_be_is_not_parsed(tmp_path: Path) -> None:
    from portkit.porting.compare import JSON_BYTES_PER_VALUE, MAX_EXTRA_TOKENS

    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"logits": [1.0, 2.0, 3.0, 4.0]}))
    bound = JSON_BYTES_PER_VALUE * (4 + MAX_EXTRA_TOKENS) + 2**20
    big = tmp_path / "big.json"
    with open(big, "w") as f:
        f.write('{"logits": [1, 2, 3, 4]' + " " * bound + "}")
    code, err, _ = peak_rss_mb("compare", str(ref), str(big))
    assert code == 2 and f"a JSON dump of {big.stat().st_size} bytes, over {bound} bytes" in err, err
    small = tmp_path / "small.json"
    small.write_text('{"logits": [1, 2, 3, 4]}' + " " * 1000)
    assert peak_rss_mb("compare", str(ref), str(small))[0] == 0
