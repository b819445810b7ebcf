"""RE-RAG's tables, each from the same commands a user runs (`rerag fit`, `calibrate`,
`predict-file`, `unanswerable-report`), on the workspace's world.

The main model is the config's RE-RAG; ablations and baselines are the same config with one
switch changed, trained for the scale's `ablation_steps`.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from rerag.infer import unanswerable
from rerag.reproduce.result import Result, markdown_table
from rerag.reproduce.workspace import Workspace


def _main(ws: Workspace) -> dict:
    return ws.fit("rerag")


def _em(predictions: list[dict]) -> float:
    from erag.answers import exact_match

    return 100 * float(np.mean([exact_match(p["reader_answer"], p["answers"]) for p in predictions]))


def table1(ws: Workspace) -> Result:
    """EM of RE-RAG against the same generator reading the retriever's order, and the RE with an
    LM reader by RAG marginalization (eq. 6) and by RALM concatenation."""
    run = _main(ws)
    test, k = run["test"], ws.top_k
    reader = ws.llm or "the RE-RAG generator"
    rows = [[f"generator, retriever's top {k} (retriever order)", 100 * test["test/em_retriever_order"]],
            [f"RE-RAG: generator, RE's top {k}, P_RE marginalization", 100 * test["test/em"]]]
    for mode, label in (("rag", "RAG marginalization over the RE's top k"), ("ralm", "RALM: RE's top k in one prompt")):
        rows.append([f"{reader}, {label}", _em(ws.predictions(run, "test", k, calibrated=False, mode=mode, llm=ws.llm))])
    data = {"em": {row[0]: row[1] for row in rows}, "top_k": k, "questions": len(ws.predictions(run, "test", k, calibrated=False))}
    return Result(markdown_table(["system", "test EM"], rows), data,
                  differs=None if ws.llm else "no LLM given (--llm): the LM rows read with the trained generator")


def table2(ws: Workspace) -> Result:
    """Recall@k of the RE reranking the retriever's list (top 100 in the paper) against the
    retriever's own order, and over the first 20 (the depth it was trained at)."""
    test = _main(ws)["test"]
    ks = sorted(int(k.rsplit("@", 1)[1]) for k in test if k.startswith("test/re_recall@"))
    depths = sorted({k.split("/")[1] for k in test if k.startswith("test/top")})
    rows = [["retriever (list order)", *(100 * test[f"test/retriever_recall@{k}"] for k in ks)],
            ["RE, whole list", *(100 * test[f"test/re_recall@{k}"] for k in ks)]]
    for depth in depths:
        rows.append([f"RE, {depth}", *(100 * test.get(f"test/{depth}/re_recall@{k}", float("nan")) for k in ks)])
    data = {row[0]: dict(zip(map(str, ks), row[1:])) for row in rows}
    return Result(markdown_table(["ranking", *(f"R@{k}" for k in ks)], rows), data)


def _retriever_sets(ws: Workspace, run: dict) -> dict[str, list[dict]]:
    """The retriever's own score as the confidence (the baseline of Tables 3, 11, 12): the top score
    of its first k, Platt-calibrated on dev so that the same thresholds apply; each test set carries
    the answer the model's generator gave reading the retriever's top k (`rerag test`'s results)."""
    import json
    from pathlib import Path

    from rerag.data.fid_format import read_fid
    from rerag.models.calibration import PlattCalibrator

    k, sets = ws.top_k, {}
    for split in ("dev", "test"):
        sets[split] = [{"id": r["id"], "question": r["question"], "answers": r["answers"],
                        "score": float(r["ctxs"][0].get("score", 0.0)),
                        "answerable": any(c.get("has_answer") for c in r["ctxs"][:k])}
                       for r in read_fid(ws.split_file(split))]
    dev = sets["dev"]
    calibrator = PlattCalibrator().fit([r["score"] for r in dev], [r["answerable"] for r in dev], source="dev")
    for rows in sets.values():
        for r, p in zip(rows, calibrator([r["score"] for r in rows])):
            r["confidence"], r["confidence_calibration"] = float(p), "retriever score, Platt"
    results = Path(run["folder"]) / "test_results.jsonl"
    answers = {row["id"]: row["answer_retriever_order"] for row in map(json.loads, results.read_text().splitlines())}
    for r in sets["test"]:
        r["reader_answer"] = answers[r["id"]]
    return sets


def _classification(dev: list[dict], test: list[dict]) -> dict[str, Any]:
    """Table 3's row for one confidence: the threshold searched on dev, applied to test."""
    best = unanswerable.search_threshold([r["confidence"] for r in dev], [not r["answerable"] for r in dev])
    labels = [not r["answerable"] for r in test]
    return {**asdict(unanswerable.classify([r["confidence"] for r in test], labels, best.threshold)),
            "unanswerable": sum(labels), "questions": len(test)}


def _pointwise(ws: Workspace) -> dict:
    """The MonoT5-style baseline: the same RE trained pointwise on has-answer alone (BCE on
    sigmoid(s), `alpha_anchor`), without the generator's signal (alpha_re = alpha_tok = 0)."""
    return ws.fit("pointwise", steps=ws.scale.ablation_steps, alpha_re=0.0, alpha_tok=0.0, alpha_anchor=1.0)


def _re_sets(ws: Workspace, run: dict) -> dict[str, list[dict]]:
    return {split: ws.predictions(run, split, ws.top_k) for split in ("dev", "test")}


def table3(ws: Workspace) -> Result:
    """Classifying the kept top-k as unanswerable (no context holds an answer) by confidence <
    threshold, the threshold searched on dev: the RE, a MonoT5-style pointwise reranker, the
    retriever's own score, and calling every set unanswerable."""
    run = _main(ws)
    sets = {"RE-RAG (set-calibrated RE)": _re_sets(ws, run),
            "MonoT5-style pointwise (set-calibrated)": _re_sets(ws, _pointwise(ws)),
            "retriever's score (Platt-calibrated)": _retriever_sets(ws, run)}
    systems = {name: _classification(s["dev"], s["test"]) for name, s in sets.items()}
    labels = [not r["answerable"] for r in sets["RE-RAG (set-calibrated RE)"]["test"]]
    systems["all unanswerable (the RE's sets)"] = {**asdict(unanswerable.all_unanswerable(labels)), "unanswerable": sum(labels),
                                   "questions": len(labels)}
    rows = [[name, "-" if name.startswith("all") else s["threshold"], s["unanswerable"], s["questions"],
             100 * s["precision"], 100 * s["recall"], 100 * s["f1"]] for name, s in systems.items()]
    return Result(markdown_table(["confidence", "threshold", "unanswerable sets", "questions", "precision",
                                  "recall", "F1"], rows), {"top_k": ws.top_k, "systems": systems},
                  differs="the retriever is BM25, whose score is no cosine: calibrated on dev to share the thresholds")


def _accuracy(ws: Workspace, sets: dict[str, list[dict]], figure: str) -> Result:
    """Table 4 (or 12): accuracy on O and X before and after answering "unanswerable" below the dev
    threshold, and the risk-coverage curve."""
    report = unanswerable.report(sets["dev"], sets["test"])
    rows = [[name, a["questions"], 100 * a["before"], 100 * a["after"]] for name, a in report["table4"].items()]
    path = ws.path("re-rag", figure)
    unanswerable.plot_risk_coverage(path, report)
    return Result(f"Threshold {report['threshold']} (searched on dev), confidence: {report['confidence']}.\n\n"
                  + markdown_table(["set", "questions", "before", "after"], rows),
                  {"threshold": report["threshold"], "table4": report["table4"]}, [path])


def table4(ws: Workspace) -> Result:
    """Accuracy on the answerable (O) and unanswerable (X) test sets before and after answering
    "unanswerable" below the dev threshold; X counts only "unanswerable" outputs as right."""
    return _accuracy(ws, _re_sets(ws, _main(ws)), "table4_risk_coverage.png")


def table12(ws: Workspace) -> Result:
    """Table 4 with the retriever's own score as the confidence, over the retriever's top k."""
    result = _accuracy(ws, _retriever_sets(ws, _main(ws)), "table12_risk_coverage.png")
    result.differs = "BM25's top score, Platt-calibrated on dev, stands for FiD-KD's cosine similarity"
    return result


def _mixed(ws: Workspace, sets: dict[str, list[dict]]) -> Result:
    """Table 5 (or 11): below the dev threshold, a closed-book LM answers instead."""
    from rerag.infer.export import load_checkpoint
    from rerag.infer.readers import ParametricReader

    threshold = unanswerable.search_threshold([r["confidence"] for r in sets["dev"]],
                                              [not r["answerable"] for r in sets["dev"]]).threshold
    test = sets["test"]
    if ws.llm:
        from erag.lm import load_lm

        reader = ParametricReader(load_lm(ws.llm))
    else:
        generator = load_checkpoint(_main(ws)["checkpoint"])[1]
        reader = ParametricReader(generator.as_lm(), template=generator.template)
    mixed = unanswerable.mixed_strategy(test, reader([r["question"] for r in test]), threshold)
    rows = [[unanswerable.MIXED_NAMES[name], 100 * mixed[name]["em"], 100 * mixed[name]["f1"]]
            for name in ("rerag", "llm_alone", "mixed")]
    return Result(f"Threshold {threshold}; {mixed['to_llm']} of {mixed['questions']} test questions "
                  "go to the closed-book LM.\n\n" + markdown_table(["system", "EM", "F1"], rows), mixed,
                  differs=None if ws.llm else "no LLM given (--llm): the trained generator answers closed-book, and "
                  "on a synthetic world it knows nothing, so this checks the mechanics only")


def table5(ws: Workspace) -> Result:
    """The mixed strategy: below the dev threshold, a closed-book LM answers instead of RE-RAG."""
    return _mixed(ws, _re_sets(ws, _main(ws)))


def table11(ws: Workspace) -> Result:
    """Table 5 with the retriever's own score as the confidence: the generator reads the retriever's
    top k, and below the threshold the closed-book LM answers."""
    return _mixed(ws, _retriever_sets(ws, _main(ws)))


def table8(ws: Workspace) -> Result:
    """Dev EM with and without L_re (alpha_re = 0), both trained for the scale's ablation steps."""
    steps = ws.scale.ablation_steps
    runs = {"RE-RAG": ws.fit("ablation", steps=steps), "without L_re": ws.fit("ablation", steps=steps, alpha_re=0.0)}
    em = {name: 100 * run["val"]["val/em"] for name, run in runs.items()}
    rows = [[name, value] for name, value in em.items()] + [["difference", em["without L_re"] - em["RE-RAG"]]]
    return Result(markdown_table(["training", "dev EM"], rows), {"dev_em": em, "steps": steps})


TABLES = {"table1": table1, "table2": table2, "table3": table3, "table4": table4, "table5": table5,
          "table8": table8, "table11": table11, "table12": table12}
