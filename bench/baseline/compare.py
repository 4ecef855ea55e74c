"""The baseline compare script (docs/measurements.md): walk two JSON files, print the max
absolute difference per field, exit 1 when any exceeds the tolerance.

    python -I compare.py pt.json candle.json 1e-4
"""

import json
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-6
worst = 0.0


def flat(x):
    if isinstance(x, list):
        for y in x:
            yield from flat(y)
    else:
        yield float(x)


def walk(x, y, path):
    global worst
    if isinstance(x, dict):
        for k in x:
            walk(x[k], y[k], f"{path}.{k}" if path else k)
        return
    fx, fy = list(flat(x)), list(flat(y))
    assert len(fx) == len(fy), (path, len(fx), len(fy))
    d = max((abs(p - q) for p, q in zip(fx, fy, strict=False)), default=0.0)
    worst = max(worst, d)
    print(f"{path:24} n={len(fx):3}  max|diff|={d:.2e}")


walk(a, b, "")
print(f"worst={worst:.2e} tol={tol:.0e} {'OK' if worst <= tol else 'MISMATCH'}")
sys.exit(0 if worst <= tol else 1)
