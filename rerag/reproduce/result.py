"""What a table or figure command returns, and the Markdown table helper they share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rerag.reproduce.verdict import Verdict


@dataclass
class Result:
    """A reproduced table or figure: its Markdown, its numbers (JSON), its PNGs, a line on how
    ours differs in kind from the paper's setting (None when it does not), and whether it
    reproduces the paper's finding (`rerag.reproduce.verdict`)."""

    markdown: str
    data: dict[str, Any]
    figures: list[str] = field(default_factory=list)
    differs: str | None = None
    verdict: Verdict | None = None


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table; floats print with one decimal (percentages) unless already strings."""

    def cell(value: Any) -> str:
        return f"{value:.1f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def plot_lines(x: list, series: dict[str, list[float | None]], path: str, title: str, xlabel: str, ylabel: str) -> str:
    """One line per named series over `x` (None values are gaps), saved as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.5, 4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for name, values in series.items():
        axes.plot(x, [float("nan") if v is None else v for v in values], marker="o", label=name)
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.savefig(path, dpi=110)
    return path
