"""`--plot FILE.png`: per-layer relative error on a log scale, with the tolerance line (the
`plot` extra: matplotlib, imported only here)."""

from __future__ import annotations

import math
from pathlib import Path

from portkit.verify.compare import LayerCheck


def plot_layers(check: LayerCheck, path: Path, *, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.name for r in check.rows]
    rel = [max(r.rel, 1e-12) if not math.isnan(r.rel) else 1.0 for r in check.rows]
    judged = math.isfinite(check.rtol)
    colours = ["#c0392b" if (judged and r.over) else "#2c7fb8" for r in check.rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.32 * len(names) + 2.5), 4.2), dpi=120)
    ax.bar(range(len(names)), rel, color=colours)
    ax.set_yscale("log")
    if judged:
        ax.axhline(check.rtol, color="#444444", linestyle="--", linewidth=1)
        ax.text(len(names) - 0.5, check.rtol * 1.25, f"tolerance {check.rtol:.0e}", ha="right", va="bottom", fontsize=8, color="#444444")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("max|diff| / max|ref|")
    first = check.first_over if judged else None
    sub = f"first layer over the line: {first}" if first else ("every layer under the line" if judged else "reported, not judged")
    ax.set_title(f"{title}\n{sub}", fontsize=9)
    ax.grid(axis="y", which="major", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
