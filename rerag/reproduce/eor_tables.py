"""EoR's tables and figures from one `rerag eor` run on the main RE-RAG model, with the paper's
protocol: the voter's weights are learned on the validation split and reported on the test split."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from rerag.reproduce.result import Result, markdown_table
from rerag.reproduce.workspace import Workspace, file_digest

POOL = ["BM25@5", "Dense@5", "BM25@RR@5", "BM25@3&Dense@3", "ReFree"]


def _eor(ws: Workspace, llm: str | None = None, correctness: str = "em") -> dict:
    """`rerag eor` with the main model's RE and generator (or `llm` as the reader): weights from dev,
    test reported; answers right by `correctness` (`eor.EoRConfig`)."""
    from eor import EoRConfig
    from rerag.integrations.eor_evaluation import run_eor

    run = ws.main()

    def go(folder: Path) -> dict:
        report = run_eor(
            checkpoint=run["checkpoint"],
            questions_file=ws.split_file("dev"),
            test_file=ws.split_file("test"),
            corpus_file=str(Path(ws.data_dir) / "corpus.jsonl"),
            pool=POOL,
            max_questions=ws.scale.questions,
            output_dir=str(folder),
            llm=llm,
            eor=EoRConfig(correctness=correctness),
        )
        return {"report": report.to_dict()}

    extra = ([llm] if llm else []) + ([correctness] if correctness != "em" else [])
    return ws.step("eor", [run["checkpoint"], file_digest(run["checkpoint"]), POOL, ws.scale.questions] + extra, go)


def _figure(ws: Workspace, done: dict, name: str, target: str) -> str:
    path = ws.path("eor", target)
    shutil.copyfile(Path(done["folder"]) / name, path)
    return path


def table1(ws: Workspace) -> Result:
    """EM, F1 and MRLR (eq. 2, in the pool with EoR) of each retriever of the pool and of EoR on the
    test split, weights from dev."""
    report = _eor(ws)["report"]
    mrlr = report["mrlr_with_eor"]
    rows = [
        [name, report["retriever_em"][name], report["retriever_f1"][name], f"{mrlr[name]:.4f}"]
        for name in report["retriever_em"]
    ]
    rows.append(["EoR", report["eor_em"], report["eor_f1"], f"{mrlr['EoR']:.4f}"])
    keys = ("retriever_em", "retriever_f1", "eor_em", "eor_f1", "num_train", "num_test", "mrlr_with_eor")
    return Result(
        f"Weights learned on {report['num_train']} dev questions, reported on {report['num_test']} "
        "test questions.\n\n" + markdown_table(["retriever", "EM", "F1", "MRLR (pool + EoR)"], rows),
        {k: report[k] for k in keys},
        differs="one reader (the RE-RAG generator) and a pool of five retrievers on the synthetic world; no BEM "
        "(its BERT answer-equivalence model is not installable from the package registries)",
    )


def table2(ws: Workspace) -> Result:
    """One LM (the RE-RAG generator) across every retriever of the pool: EM, best and worst."""
    em = _eor(ws)["report"]["retriever_em"]
    rows = [[name, value] for name, value in sorted(em.items(), key=lambda kv: -kv[1])]
    spread = max(em.values()) - min(em.values())
    return Result(
        markdown_table(["retriever", "EM"], rows) + f"\n\nBest minus worst: {spread:.1f} EM.",
        {"retriever_em": em, "spread": spread},
    )


def table4(ws: Workspace) -> Result:
    """The appendix's main results as printed: EM and F1 of ReFree, Top R (the pool's best single
    retriever by test EM, as the paper picks it) and EoR on the test split."""
    report = _eor(ws)["report"]
    em, f1 = report["retriever_em"], report["retriever_f1"]
    top = max((name for name in em if name != "ReFree"), key=lambda name: em[name])
    rows = [
        ["ReFree", em["ReFree"], f1["ReFree"]],
        [f"Top R ({top})", em[top], f1[top]],
        ["EoR", report["eor_em"], report["eor_f1"]],
    ]
    return Result(
        markdown_table(["R", "EM", "F1"], rows),
        {"top_r": top, "em": {r[0]: r[1] for r in rows}, "f1": {r[0]: r[2] for r in rows}},
        differs="one reader on the synthetic world; no BEM (its BERT answer-equivalence model is not "
        "installable from the package registries)",
    )


def figure1(ws: Workspace) -> Result:
    """The relative win ratio (RWR, eq. 1) between every pair of retrievers and EoR."""
    path = _figure(ws, _eor(ws), "rwr_heatmap.png", "figure1_rwr_heatmap.png")
    report = _eor(ws)["report"]
    return Result(
        f"RWR heatmap of the {len(report['retriever_em'])} retrievers and EoR on {report['num_test']} test questions.",
        {},
        [path],
    )


def figure2(ws: Workspace) -> Result:
    """MRLR of the pool's retrievers (one box per base model: the RE-RAG generator, and the LM of
    `--llm` when given) on the world at hand; an answer is right when it contains a gold answer,
    since an LLM's sentences are never exact matches (the paper used BEM)."""
    from eor.plots import plot_boxplot

    reports = {"RE-RAG generator": _eor(ws, correctness="contains")["report"]}
    if ws.llm:
        reports[ws.llm] = _eor(ws, ws.llm, correctness="contains")["report"]
    models = {name: report["mrlr_pool"] for name, report in reports.items()}
    path = str(
        plot_boxplot(
            {name: list(mrlr.values()) for name, mrlr in models.items()},
            ws.path("eor", "figure2_mrlr.png"),
            "MRLR of the pool's retrievers",
            "MRLR",
        )
    )
    rows = [
        [name, *(f"{report['mrlr_pool'][r]:.4f} ({report['retriever_accuracy'][r]:.0f})" for r in POOL)]
        for name, report in reports.items()
    ]
    return Result(
        "MRLR of each retriever (its accuracy, %, in brackets; right = contains a gold answer), "
        f"{next(iter(reports.values()))['num_test']} test questions:\n\n" + markdown_table(["base model", *POOL], rows),
        {"mrlr_pool": models, "accuracy": {n: r["retriever_accuracy"] for n, r in reports.items()}},
        [path],
        differs="one world (the paper: NQ, WebQ and TriviaQA) and the base models at hand"
        + ("" if ws.llm else " (no --llm given: the RE-RAG generator alone)")
        + "; correctness by containment, where the paper used BEM",
    )


def figure5(ws: Workspace) -> Result:
    """The oracle upper bound (a question is right when any retriever of the sub-pool is) by pool size."""
    path = _figure(ws, _eor(ws), "upper_bound.png", "figure5_upper_bound.png")
    return Result("Oracle EM of every sub-pool by pool size (boxes), the best single retriever dashed.", {}, [path])


def figure4(ws: Workspace) -> Result:
    """RWR of each error type of appendix B (retriever, hallucination, extraction, lucky guess)
    between every pair of retrievers, and each retriever's error rates."""
    done = _eor(ws)
    rates = done["report"]["error_rates"]
    paths = [_figure(ws, done, f"error_rwr_{e}.png", f"figure4_error_rwr_{e}.png") for e in rates]
    rows = [[name, *(f"{rates[e][name]:.1f}" for e in rates)] for name in done["report"]["retriever_em"]]
    return Result(
        "Share (%) of the kept test questions with each error:\n\n"
        + markdown_table(["retriever", *(f"{e.replace('_', ' ')} error" for e in rates)], rows),
        {"error_rates": rates},
        paths,
        differs="correctness is exact match (the paper used BEM)",
    )


def _bars(ws: Workspace, values: dict[str, float], target: str, title: str, ylabel: str) -> str:
    from eor.plots import plot_bars

    return str(plot_bars(values, ws.path("eor", target), title, ylabel))


def figure3(ws: Workspace) -> Result:
    """Test EM of each retriever and of EoR (the paper plots corpus-level accuracy per retriever)."""
    report = _eor(ws)["report"]
    values = {**report["retriever_em"], "EoR": report["eor_em"]}
    path = _bars(ws, values, "figure3_accuracy.png", "EM per retriever (test)", "EM (%)")
    return Result(markdown_table(["system", "EM"], [[k, v] for k, v in values.items()]), values, [path])


def figure6(ws: Workspace) -> Result:
    """The learned weights: one per retriever (w^r) and one per similarity metric (w^m)."""
    weights = _eor(ws)["report"]["weights"]
    values = {
        **{f"w^r {k}": v for k, v in weights["retrievers"].items()},
        **{f"w^m {k}": v for k, v in weights["metrics"].items()},
    }
    path = _bars(ws, values, "figure6_weights.png", "Learned EoR weights", "weight")
    return Result(
        markdown_table(["weight", "value"], [[k, f"{v:.3f}"] for k, v in values.items()]),
        {"weights": weights, "mean_retriever_weight": float(np.mean(list(weights["retrievers"].values())))},
        [path],
    )


TABLES = {
    "table1": table1,
    "table2": table2,
    "table4": table4,
    "figure1": figure1,
    "figure2": figure2,
    "figure3": figure3,
    "figure4": figure4,
    "figure5": figure5,
    "figure6": figure6,
}
