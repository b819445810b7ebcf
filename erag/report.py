"""Write an eRAG result as JSON and a scatter of per-query eRAG metrics against end-to-end scores
(the per-query view behind the correlations of Table 1)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

PathLike = str | Path


def _json_safe(value):
    """NaN (an undefined correlation) becomes null, so the file is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def write_report(result: dict, path_json: PathLike, path_png: PathLike | None = None, labeling: str = "erag") -> None:
    """Write ``result`` to ``path_json``; with ``path_png``, also plot each metric of ``labeling``
    against the end-to-end score, one panel per metric, titled with Kendall's tau and Spearman's rho.

    ``result`` is what ``erag.compare_with_end_to_end`` returns; the JSON part also accepts what
    ``erag.evaluate`` returns, which has no end-to-end scores to plot.
    """
    path_json = Path(path_json)
    path_json.parent.mkdir(parents=True, exist_ok=True)
    path_json.write_text(json.dumps(_json_safe(result), indent=2, allow_nan=False) + "\n")
    if path_png is None:
        return
    if "end_to_end" not in result:
        raise ValueError("a scatter needs end-to-end scores: pass the result of erag.compare_with_end_to_end")
    end_to_end = result["end_to_end"]["per_query"]
    per_query = result["labelings"][labeling]["per_query"]
    correlation = result["correlation"][labeling]
    qids = list(end_to_end)
    metrics = list(per_query[qids[0]])
    columns = min(3, len(metrics))
    rows = -(-len(metrics) // columns)
    figure = Figure(figsize=(4 * columns, 3.6 * rows), layout="constrained")
    FigureCanvasAgg(figure)
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(rows, columns, index + 1)
        axes.scatter([per_query[q][metric] for q in qids], [end_to_end[q] for q in qids], alpha=0.5, s=14)
        axes.set_xlabel(f"{labeling} {metric}")
        axes.set_ylabel("end-to-end score")
        c = correlation[metric]
        title = (
            f"{metric}: undefined, {c['undefined']}"
            if c.get("undefined")
            else f"{metric}: tau={c['kendall_tau']:.3f}, rho={c['spearman_rho']:.3f}"
        )
        axes.set_title(title, fontsize=10 if not c.get("undefined") else 7, wrap=True)
    path_png = Path(path_png)
    path_png.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path_png, dpi=120)
