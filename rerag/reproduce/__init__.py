"""`rerag reproduce PAPER [TABLE ...] --scale toy|quick|full`: every table and figure of the three
papers from one command, and REPRODUCTION.md beside the paper's numbers.

Each table is a function of a `Workspace` (`rerag_tables`, `eor_tables`, `erag_tables`) that asks
for the runs it needs (cached under a hash of their settings, so tables share them and a rerun
reuses them) and returns a `Result`. The runner writes OUT/<paper>/<table>.md and .json, keeps
every result in OUT/index.json, and renders the document from the index and `papers.yaml` (the
papers' own numbers, transcribed from their texts).
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Literal

from rerag.reproduce import eor_tables, erag_tables, rerag_tables
from rerag.reproduce.result import Result
from rerag.reproduce.workspace import DEFAULT_TOP_K, Workspace

PAPERS = {"re-rag": "RE-RAG", "eor": "Ensemble of Retrievers (EoR)", "erag": "eRAG"}

#: paper -> table or figure -> the function that makes it.
REGISTRY: dict[str, dict[str, Callable[[Workspace], Result]]] = {
    "re-rag": rerag_tables.TABLES,
    "eor": eor_tables.TABLES,
    "erag": erag_tables.TABLES,
}


def paper_numbers() -> dict:
    import yaml

    return yaml.safe_load((Path(__file__).with_name("papers.yaml")).read_text())


def _sort_key(name: str) -> tuple[int, int]:
    kind = 0 if name.startswith("table") else 1
    return kind, int("".join(c for c in name if c.isdigit()) or 0)


def selected(paper: str, tables: list[str] | None) -> list[tuple[str, str]]:
    papers = list(REGISTRY) if paper == "all" else [paper]
    chosen = [(p, t) for p in papers for t in sorted(REGISTRY[p], key=_sort_key) if not tables or t in tables]
    unknown = set(tables or ()) - {t for _, t in chosen}
    if unknown:
        raise ValueError(
            f"no table or figure {sorted(unknown)} in {papers}; known: "
            + "; ".join(f"{p}: {', '.join(sorted(REGISTRY[p], key=_sort_key))}" for p in papers)
        )
    return chosen


def run_table(ws: Workspace, paper: str, name: str) -> dict:
    """Make one table or figure; write its Markdown and JSON; return its index entry."""
    make = REGISTRY[paper][name]
    command = f"rerag reproduce {paper} {name} --scale {ws.scale_name}{ws.options()}"
    ws.used.clear()
    start = time.perf_counter()
    result = make(ws)
    seconds = round(time.perf_counter() - start, 1)
    Path(ws.path(paper, f"{name}.md")).write_text(result.markdown + "\n")
    Path(ws.path(paper, f"{name}.json")).write_text(json.dumps(asdict(result), indent=2) + "\n")
    runs = []
    for use in ws.used:  # each run once, as first asked for
        if all(use["folder"] != r["folder"] for r in runs):
            runs.append(use)
    return {
        "command": command,
        "scale": ws.scale_name,
        "seconds": seconds,
        "runs": [{k: u[k] for k in ("name", "seconds", "reused", "folder")} for u in runs],
        "seeds": sorted({u["seed"] for u in runs if u.get("seed") is not None}),
        **asdict(result),
    }


def reproduce(
    paper: Literal["re-rag", "eor", "erag", "all"],
    tables: list[str] | None = None,
    *,
    scale: Literal["toy", "quick", "full"] = "quick",
    out: str = "outputs/reproduce",
    doc: str | None = "REPRODUCTION.md",
    fit_config: str = "rerag:configs/demo.yaml",
    data_dir: str | None = None,
    top_k: int = DEFAULT_TOP_K,
    llm: str | None = None,
) -> dict:
    """Reproduce the papers' tables and figures: train what they need, reuse what a run already made.

    Args:
        paper: re-rag, eor, erag or all.
        tables: the tables and figures to make (e.g. table2 figure1; default: all of the paper's).
        scale: toy = a few steps on a tiny world (the mechanics); quick = the demo world, the main model
            600 steps, each ablation and baseline 200, EoR and eRAG on 100 questions per split; full = the
            demo's settings (1,200 steps each, every question).
        out: output folder: <paper>/<table>.md, .json and .png, runs/ (the cache) and index.json.
        doc: the Markdown report, rewritten from the index (None: do not write it).
        fit_config: the `rerag fit` config every model starts from (a real-data config runs the paper scale);
            `rerag:configs/...` names a config shipped in the package.
        data_dir: the FiD data folder (default: data/demo; toy: OUT/data).
        top_k: contexts the RE keeps for answers and confidence (demo 5; paper 25).
        llm: a Hugging Face LM for the LLM-reader rows of Table 1 and the closed-book fallback of
            Table 5 (default: the trained generator).
    """
    start = time.perf_counter()
    ws = Workspace(out, scale, fit_config, data_dir, top_k, llm)
    index_path, calls_path = Path(out) / "index.json", Path(out) / "invocations.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    for p, name in selected(paper, tables):
        print(f"[reproduce] {p} {name} ...", flush=True)
        index.setdefault(p, {})[name] = entry = run_table(ws, p, name)
        index_path.parent.mkdir(parents=True, exist_ok=True)
        index_path.write_text(json.dumps(index, indent=2) + "\n")
        print(f"[reproduce] {p} {name}: done in {entry['seconds']} s", flush=True)
    calls = json.loads(calls_path.read_text()) if calls_path.exists() else []
    calls.append(
        {
            "command": " ".join(["rerag reproduce", paper, *(tables or []), "--scale", scale]) + ws.options(),
            "minutes": round((time.perf_counter() - start) / 60, 1),
        }
    )
    calls_path.write_text(json.dumps(calls, indent=2) + "\n")
    if doc:
        Path(doc).write_text(document(index, out, calls))
        print(f"[reproduce] {doc} <- {index_path}")
    return index


def verdict_table(index: dict, paper: dict) -> list[str]:
    """The table REPRODUCTION.md opens with: for every table and figure of the three papers (`paper`,
    papers.yaml), the paper's finding, ours and whether it is reproduced (`rerag.reproduce.verdict`)."""
    rows, counts = [], {}
    for key, title in PAPERS.items():
        for name in sorted(paper[key], key=_sort_key):
            entry = index.get(key, {}).get(name) or {}
            verdict = entry.get("verdict") or {}
            reproduced = verdict.get("reproduced") or ("no verdict" if entry else "not run yet")
            counts[reproduced] = counts.get(reproduced, 0) + 1
            heading = name.replace("table", "Table ").replace("figure", "Figure ")
            cells = [
                f"{title.split(' (')[0]} {heading}",
                paper[key][name].get("finding", ""),
                verdict.get("ours", ""),
                f"**{reproduced}**" + (f": {verdict['why']}" if verdict.get("why") else ""),
            ]
            rows.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return [
        "## Verdicts",
        "",
        "Reproduced: **yes**, the paired-bootstrap 95% interval (questions resampled) excludes zero on the "
        "paper's side, or a count shows the finding; **no**, the interval excludes zero on the other side, or "
        "the count fails; **inconclusive**, the interval holds zero; **partly**, a finding of several parts "
        "whose parts disagree, each part shown; **not testable here**, why. "
        "Intervals are ours minus the comparison, in the table's units. "
        + ", ".join(f"{reproduced}: {n}" for reproduced, n in counts.items())
        + ".",
        "",
        "| table | the paper finds | ours | reproduced |",
        "|---|---|---|---|",
        *rows,
        "",
    ]


def _machine() -> str:
    import lightning
    import torch
    import transformers

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {os.cpu_count()} cores"
    # results can move with the libraries (transformers 5.24 renamed the generation cache `forward` receives)
    return (
        f"{device}; Python {platform.python_version()}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, lightning {lightning.__version__}"
    )


def document(index: dict, out: str, calls: list[dict] = ()) -> str:
    """REPRODUCTION.md: per paper, per table, the paper's numbers beside ours, the command, seeds, time;
    and the wall time of each `rerag reproduce` call that filled the output folder (`calls`)."""
    paper = paper_numbers()
    scales = sorted({e["scale"] for tables in index.values() for e in tables.values()})
    lines = [
        "# Reproduction: every table and figure of the three papers",
        "",
        "Written by `rerag reproduce` (do not edit by hand). Each entry: the paper's setting and numbers "
        "(transcribed from the papers' extracted texts, `rerag/reproduce/papers.yaml`), ours with the command "
        "that made it, its seeds and its wall time, and one line where ours differs in kind.",
        "",
        f"- Machine: {_machine()}.",
        f"- Scales in this file: {', '.join(scales) or 'none'} (`--scale`; see `rerag reproduce --help`).",
        "- The calls that filled the output folder, in order, with their wall time (a later call reads back "
        "what an earlier one made): "
        + ("; ".join(f"`{c['command']}` {c['minutes']} min" for c in calls) or "none recorded")
        + ".",
        f"- Outputs (Markdown, JSON, PNG): `{out}/<paper>/`. A table's time counts the runs it started; "
        "runs it reused from the cache are listed with the time they took when made.",
        "- The world is the demo's synthetic one (`configs/demo.yaml`) unless `--fit_config` says otherwise: "
        "absolute numbers are not comparable with the papers', the comparisons inside a table are. The main "
        "model trains as that config does: the demo trains with no relevance label of its world (eq. 12's "
        "losses), from an RE relevance-pretrained on a corpus disjoint from it (docs/demo.md). Every baseline "
        "and ablation of RE-RAG's tables trains the same config and differs from it in the one component "
        "under study: the pointwise RE (Tables 2, 3) in its objective and the RAG baseline (Tables 1, 6) in "
        "training its generator without the RE, for the main model's steps; the ablations of Tables 7, 8 "
        "and Figure 2 for the scale's ablation steps, beside the config trained as long.",
        "",
        *verdict_table(index, paper),
    ]
    for key, title in PAPERS.items():
        lines += [f"## {title}", ""]
        for name in sorted(REGISTRY[key], key=_sort_key):
            theirs = paper.get(key, {}).get(name, {})
            heading = name.replace("table", "Table ").replace("figure", "Figure ")
            lines += [
                f"### {title.split(' (')[0]} {heading}: {theirs.get('title', '')}",
                "",
                f"**Paper** ({theirs.get('setting', 'setting not transcribed')}):",
                "",
            ]
            lines += [theirs["numbers"].strip(), ""] if theirs.get("numbers") else []
            if theirs.get("missing"):
                lines += [f"*Not in the extracted text:* {theirs['missing']}", ""]
            entry = index.get(key, {}).get(name)
            if entry is None:
                lines += [f"**Ours:** not run yet: `rerag reproduce {key} {name} --scale quick`.", ""]
            else:
                reused = [f"{r['name']} {r['seconds'] / 60:.1f} min" for r in entry["runs"] if r["reused"]]
                lines += [
                    f"**Ours** (`{entry['command']}`; seeds {entry['seeds'] or '-'}; "
                    f"{entry['seconds'] / 60:.1f} min" + (f", reusing {', '.join(reused)}" if reused else "") + "):",
                    "",
                    entry["markdown"].strip(),
                    "",
                ]
                lines += [f"Figure: `{f}`" for f in entry["figures"]] + ([""] if entry["figures"] else [])
                if entry.get("differs"):
                    lines += [f"*Differs in kind:* {entry['differs']}.", ""]
    return "\n".join(lines)
