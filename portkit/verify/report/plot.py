"""`--plot FILE.png`: per-layer relative error on a log scale, with the tolerance line (the
`plot` extra: matplotlib, imported only here)."""

from __future__ import annotations

import math
from pathlib import Path

from portkit.verify.judge.checks import LayerCheck
from portkit.verify.pipeline import VerifyReport


def check_plot_path(plot: Path, *, layers: bool = True) -> None:
    """`--plot`'s path checked before anything runs: a .png in a directory that exists, and
    matplotlib installed (`layers`: verify's per-layer capture, which the plot draws, is on)."""
    from portkit.verify.errors import BadInput

    if not layers:
        raise BadInput("--plot draws the per-layer errors: it cannot be combined with --no-layers")
    if plot.suffix.lower() != ".png":
        raise BadInput(f"--plot {plot}: the plot is a PNG (give a path ending in .png)")
    if not plot.resolve().parent.is_dir():
        raise BadInput(f"--plot {plot}: the directory does not exist")
    try:
        import matplotlib  # noqa: F401 - only whether it is installed, before the run
    except ImportError:
        raise BadInput("--plot needs matplotlib: pip install 'portkit[plot]'") from None


def plot_layers(check: LayerCheck, path: Path, *, title: str, subtitle: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = check.layer_rows  # the judged values between the layers; sub-layers are in the table
    names = [r.name for r in rows]
    rel = [1.0 if math.isnan(r.rel) else r.rel for r in rows]
    judged = math.isfinite(check.rtol)
    nonzero = [x for x in rel if x > 0]
    low = min(nonzero + ([check.rtol] if judged else [])) if nonzero or judged else 1e-8
    floor = 10 ** math.floor(math.log10(low) - 1.5)
    top = 10 ** math.ceil(math.log10(max(rel + ([check.rtol] if judged else []) + [floor * 10])) + 0.5)
    heights = [x if x > 0 else floor for x in rel]
    colours = ["#c0392b" if (judged and r.over) else "#2c7fb8" for r in rows]

    fig, ax = plt.subplots(figsize=(max(6.0, 0.3 * len(names) + 2.5), 4.4), dpi=120)
    bars = ax.bar(range(len(names)), heights, color=colours, bottom=0)
    for b, x in zip(bars, rel, strict=False):
        if x == 0:
            b.set_color("#bbbbbb")
            ax.text(
                b.get_x() + b.get_width() / 2, floor * 1.6, "0", ha="center", va="bottom", fontsize=7, color="#555555"
            )
    ax.set_yscale("log")
    ax.set_ylim(floor, top)
    if judged:
        ax.axhline(check.rtol, color="#333333", linestyle="--", linewidth=1)
        ax.annotate(
            f"tolerance {check.rtol:.0e}",
            xy=(0.01, check.rtol),
            xycoords=("axes fraction", "data"),
            xytext=(0, 3),
            textcoords="offset points",
            fontsize=8,
            color="#333333",
            bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8),
        )
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("relative error  max|diff| / max|ref|", fontsize=9)
    first = check.first_over if judged else None
    verdict = (
        f"first layer over the line: {first}"
        if first
        else ("every layer under the line" if judged else "reported, not judged")
    )
    ax.set_title(f"{title}\n{subtitle + ' - ' if subtitle else ''}{verdict}", fontsize=9)
    ax.grid(axis="y", which="major", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    try:
        fig.savefig(path)
    except OSError as e:
        from portkit.verify.errors import BadInput

        raise BadInput(f"--plot {path}: cannot write it: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return path


def plot_report(rep: VerifyReport, path: Path) -> Path | None:
    """verify's per-layer errors of candle against transformers as a PNG (None: nothing
    compared per layer)."""
    c = rep.comparison
    if c is None or c.layers is None:
        return None
    o = rep.options
    return plot_layers(
        c.layers,
        path,
        title=f"candle 0.11.0 {o.device} {o.dtype} vs transformers eager f32, per layer",
        subtitle=rep.model.root.name,
    )
