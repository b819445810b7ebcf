"""PNG figures in the paper's style: RWR heatmaps (figures 1, 4), boxplots (figures 2, 5) and bars (figures 3, 6).

Figures are drawn on matplotlib's Agg canvas without pyplot, leaving the global backend alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _figure(**kwargs) -> Figure:
    # matplotlib loads on the first plot, so that `import eor` works where it is not installed.
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def plot_heatmap(matrix, labels: Sequence[str], path: str | Path, title: str = "") -> Path:
    """A [R, R] matrix (e.g. `rwr_matrix`) with row i / column j labelled by retriever and each
    cell annotated; -1 marks an undefined error RWR as in figure 4."""
    matrix = np.asarray(matrix, dtype=float)
    size = 1.0 + 0.55 * len(labels)
    figure = _figure(figsize=(size + 1.5, size))
    axes = figure.subplots()
    image = axes.imshow(matrix, cmap="Blues", vmin=0.0, vmax=max(1e-9, float(matrix.max())))
    axes.set_xticks(range(len(labels)), labels, rotation=60, ha="right")
    axes.set_yticks(range(len(labels)), labels)
    for (i, j), value in np.ndenumerate(matrix):
        axes.text(
            j,
            i,
            f"{value:.2f}",
            ha="center",
            va="center",
            fontsize=7,
            color="white" if value > 0.6 * matrix.max() else "black",
        )
    figure.colorbar(image, ax=axes)
    axes.set_title(title)
    return _save(figure, path)


def plot_boxplot(
    groups: Mapping[str, Sequence[float]],
    path: str | Path,
    title: str = "",
    ylabel: str = "",
    reference: float | None = None,
) -> Path:
    """One box per group, e.g. MRLR per dataset (figure 2) or `oracle_upper_bound` per pool size
    (figure 5), with an optional dashed reference line (figure 5's best single retriever)."""
    figure = _figure(figsize=(1.5 + 0.6 * len(groups), 4))
    axes = figure.subplots()
    axes.boxplot([list(v) for v in groups.values()])
    axes.set_xticks(range(1, len(groups) + 1), [str(k) for k in groups])
    if reference is not None:
        axes.axhline(reference, linestyle="--", color="grey")
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    return _save(figure, path)


def plot_bars(values: Mapping[str, float], path: str | Path, title: str = "", ylabel: str = "") -> Path:
    """One bar per named value, e.g. accuracy per retriever (figure 3) or learned weights (figure 6)."""
    figure = _figure(figsize=(1.5 + 0.6 * len(values), 4))
    axes = figure.subplots()
    axes.bar(range(len(values)), list(values.values()))
    axes.set_xticks(range(len(values)), list(values), rotation=45, ha="right")
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    return _save(figure, path)


def _save(figure: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path
