"""RE-RAG's tables, each from the same commands a user runs (`rerag fit`, `calibrate`,
`predict-file`, `unanswerable-report`), on the workspace's world.

One RE, one switch: the main model is the config's RE-RAG (the demo's, trained with no relevance
label). Each baseline differs from it in the component under study alone: the pointwise RE (Table 2,
3) in its objective, the RAG baseline (Tables 1, 6) in training its generator without the RE, both
for the main model's steps. The ablations (Tables 7, 8, Figure 2) train the same config for the
scale's `ablation_steps` with one switch changed, beside the config itself trained as long.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from rerag.defaults import DENSE_ENCODER
from rerag.infer import unanswerable
from rerag.reproduce.result import Result, markdown_table, plot_lines
from rerag.reproduce.verdict import (
    Difference,
    Verdict,
    by_direction,
    combined,
    f1_of_rows,
    paired_difference,
    pooled_difference,
    untestable,
)
from rerag.reproduce.workspace import DEMO_DATA, Workspace

#: The context set the paper's unanswerable tables classify (Tables 3, 4 and 12): the top 25.
UNANSWERABLE_TOP_K = 25


def _em(predictions: list[dict]) -> float:
    from erag.answers import exact_match

    return 100 * float(np.mean([exact_match(p["reader_answer"], p["answers"]) for p in predictions]))


def _mean(right: list[float]) -> float:
    """Per-question exact matches (0/1) as EM in percent."""
    return 100 * float(np.mean(right))


def _results(run: dict) -> dict[str, dict]:
    """`rerag test`'s per-question rows of a tested run, by question id."""
    from rerag.infer.compare import load_results

    return load_results(Path(run["folder"]) / "test_results.jsonl")


def _synthetic(ws: Workspace) -> bool:
    """Whether the world is the project's generated one, whose facts no LM knows."""
    return ws.scale_name == "toy" or ws.data_dir == DEMO_DATA


def table1(ws: Workspace) -> Result:
    """EM of RE-RAG against the RAG baseline (the generator trained without the RE, reading the
    retriever's top k by its scores), and the RE with an LM reader by RAG marginalization (eq. 6) and
    by RALM concatenation. The verdict pairs RE-RAG and the baseline on the same test questions."""
    run = ws.main()
    test, k = run["test"], ws.top_k
    reader = ws.llm or "the RE-RAG generator"
    right = _rag_rows(ws)
    rows = [
        [f"RAG baseline: generator trained without the RE, retriever's top {k} and scores", _mean(right["baseline"])],
        [f"RE-RAG's generator, retriever's top {k} (retriever order)", 100 * test["test/em_retriever_order"]],
        [f"RE-RAG: generator, RE's top {k}, P_RE marginalization", 100 * test["test/em"]],
    ]
    for mode, label in (("rag", "RAG marginalization over the RE's top k"), ("ralm", "RALM: RE's top k in one prompt")):
        predictions = ws.predictions(run, "test", k, calibrated=False, mode=mode, llm=ws.llm)
        rows.append([f"{reader}, {label}", _em(predictions)])
    data = {"em": {row[0]: row[1] for row in rows}, "top_k": k, "questions": len(predictions)}
    data["paired_questions"] = len(right["baseline"])
    return Result(
        markdown_table(["system", "test EM"], rows),
        data,
        differs=None if ws.llm else "no LLM given (--llm): the LM rows read with the trained generator",
        verdict=by_direction(
            f"RE-RAG minus the RAG baseline, test EM ({len(right['baseline'])} questions)",
            paired_difference(right["RE-RAG"], right["baseline"], scale=100),
        ),
    )


def _rag_baseline(ws: Workspace, seed: int = 0) -> dict:
    """The paper's RAG baseline: the main model's config, steps and seed with one switch, its generator
    trained without the RE (marginalizing with the retriever's scores; the RE is never run)."""
    stages = [{"train": "generator", "marginalize_with": "retriever"}]
    return ws.fit("baseline", steps=ws.scale.fit_steps, validate=False, seed=seed, stages=stages)


def _rag_rows(ws: Workspace, seed: int = 0) -> dict[str, list[float]]:
    """Per test question (the scale's questions), the exact match of each way of reading Table 6
    compares: the RAG baseline's generator reading the retriever's top k with the retriever's
    scores, with the RE's scores, the RE's top k with either; and RE-RAG (the main model's RE and
    generator). The RE is the main model's; both models are `seed`'s runs."""
    import torch

    from erag.answers import exact_match
    from rerag.infer.export import load_checkpoint
    from rerag.infer.readers import RAGReader

    def read(folder):
        k, records = ws.top_k, _test_records(ws)
        estimator, rerag_generator = load_checkpoint(ws.main(seed)["checkpoint"])
        baseline = load_checkpoint(_rag_baseline(ws, seed)["checkpoint"])[1]
        with torch.no_grad():
            re_scores = [estimator.score(r["question"], r["ctxs"]) for r in records]
        retriever_scores = [torch.tensor([float(c.get("score", 0.0)) for c in r["ctxs"]]) for r in records]
        by_retriever = [torch.arange(min(k, len(r["ctxs"]))) for r in records]
        by_re = [torch.argsort(s, descending=True, stable=True)[:k] for s in re_scores]
        ways = {
            "baseline": (baseline, by_retriever, retriever_scores),
            "baseline + RE score": (baseline, by_retriever, re_scores),
            "baseline + RE rerank": (baseline, by_re, retriever_scores),
            "baseline + RE rerank, score": (baseline, by_re, re_scores),
            "RE-RAG": (rerag_generator, by_re, re_scores),
        }
        right = {}
        for name, (generator, kept, scores) in ways.items():
            contexts = [[r["ctxs"][j] for j in idx.tolist()] for r, idx in zip(records, kept)]
            answers = RAGReader(generator.as_lm()).answer(
                [r["question"] for r in records], contexts, [s[idx] for s, idx in zip(scores, kept)]
            )
            right[name] = [float(exact_match(a.text, r["answers"])) for a, r in zip(answers, records)]
        return right

    from rerag.reproduce.workspace import file_digest

    main, baseline = ws.main(seed)["checkpoint"], _rag_baseline(ws, seed)["checkpoint"]
    key = [file_digest(main), file_digest(baseline), ws.top_k, ws.scale.questions]
    return {k: v for k, v in ws.step("rag_rows", key, read).items() if k not in ("folder", "seconds")}


def table2(ws: Workspace) -> Result:
    """Recall@k of the RE reranking the retriever's whole list (top 100 in the paper) against the
    retriever's own order, reranking only the retriever's first d (the config's `eval_depths`), and
    the pointwise MonoT5-style RE reranking the whole list."""
    test = ws.main()["test"]
    ks = sorted(int(k.rsplit("@", 1)[1]) for k in test if k.startswith("test/re_recall@"))
    depths = sorted({k.split("/")[1] for k in test if k.startswith("test/top")})
    rows = [
        ["retriever (list order)", *(100 * test[f"test/retriever_recall@{k}"] for k in ks)],
        ["RE, whole list", *(100 * test[f"test/re_recall@{k}"] for k in ks)],
    ]
    for depth in depths:
        rows.append([f"RE, {depth}", *(100 * test.get(f"test/{depth}/re_recall@{k}", float("nan")) for k in ks)])
    pointwise_run = _pointwise(ws)
    pointwise = pointwise_run["test"]
    rows.append(["MonoT5-style pointwise RE, whole list", *(100 * pointwise[f"test/re_recall@{k}"] for k in ks)])
    data = {row[0]: dict(zip(map(str, ks), row[1:])) for row in rows}
    return Result(
        markdown_table(["ranking", *(f"R@{k}" for k in ks)], rows),
        data,
        verdict=reranks_better(_results(ws.main()), _results(pointwise_run)),
    )


def reranks_better(main: dict[str, dict], pointwise: dict[str, dict]) -> Verdict:
    """Recall@1 (has-answer) of the RE against the retriever's order and the pointwise RE, paired by question."""
    from rerag.metrics import hits_at_k

    def hits(rows: dict[str, dict], order: str) -> np.ndarray:
        return hits_at_k([rows[i]["first_hit"][order]["has_answer"] for i in sorted(main)], 1)

    re = hits(main, "re")
    return combined(
        by_direction("RE minus retriever order, test R@1", paired_difference(re, hits(main, "retriever"), scale=100)),
        by_direction("RE minus pointwise RE, test R@1", paired_difference(re, hits(pointwise, "re"), scale=100)),
    )


def _pointwise(ws: Workspace) -> dict:
    """The MonoT5-style baseline: the main model's config, start, steps and contexts with one switch,
    its objective: the RE trained pointwise, per context, with cross-entropy of its "true"/"false"
    token against has_answer (one stage, `re_learns_from: labels`); no generator reaches its loss.
    Tested, so that Table 2 can read its reranking."""
    return ws.fit(
        "pointwise",
        steps=ws.scale.fit_steps,
        validate=False,
        test=True,
        stages=[{"train": "estimator", "re_learns_from": "labels"}],
    )


def _re_sets(ws: Workspace, run: dict, paper: bool = True, top_k: int | None = None) -> dict[str, list[dict]]:
    """An RE's kept sets (its top `top_k`, default the workspace's) on dev and test. `paper`: the
    confidence is the paper's, max_j P("true" | q, c_j) = sigmoid(max_j s_j), uncalibrated;
    otherwise ours, the RE's set-level calibration."""
    top_k = top_k or ws.top_k
    sets = {split: ws.predictions(run, split, top_k, calibrated=not paper) for split in ("dev", "test")}
    if paper:
        sets = {
            split: [{**r, "confidence": r["confidence_raw"], "confidence_calibration": 'max_j P("true")'} for r in rows]
            for split, rows in sets.items()
        }
    return sets


def _dense_world(ws: Workspace) -> dict[str, np.ndarray | list[str]]:
    """The dense encoder's (all-MiniLM-L6-v2) embeddings of the world's corpus and of the dev and test
    questions, L2-normalized, computed once: every cosine of Tables 3 and 12 is a dot product of them."""
    from eor.corpus import load_corpus
    from eor.encoder import Encoder
    from erag.lm import resolve
    from rerag.data.fid_format import read_fid
    from rerag.reproduce.workspace import file_digest

    corpus_file = Path(ws.data_dir) / "corpus.jsonl"

    def embed(folder: Path) -> dict:
        encoder, corpus = Encoder(resolve(DENSE_ENCODER)), load_corpus(corpus_file)
        np.save(folder / "corpus.npy", encoder.encode([p.to_text() for p in corpus]))
        for split in ("dev", "test"):
            np.save(folder / f"{split}.npy", encoder.encode([r["question"] for r in read_fid(ws.split_file(split))]))
        return {"ids": [p.id for p in corpus]}

    files = [corpus_file, ws.split_file("dev"), ws.split_file("test")]
    done = ws.step("dense_world", [DENSE_ENCODER, *map(file_digest, files)], embed)
    folder = Path(done["folder"])
    return {"ids": done["ids"], **{name: np.load(folder / f"{name}.npy") for name in ("corpus", "dev", "test")}}


def _unanswerable_sets(ws: Workspace) -> dict[str, dict[str, list[dict]]]:
    """Tables 3 and 4's context sets as the paper takes them: the main RE's top 25 of BM25's list per
    dev and test question (`rerag predict-file`, uncalibrated), one set per question for every
    classifier, so that all are scored on the same sets and labels. Per classifier and split, the
    sets with its confidence: the RE's max_j P("true") (the paper's), the pointwise RE's max_j
    P("true") over the same contexts, and the retriever's max_j cosine (the dense encoder's, clipped
    to [0, 1]) over the same contexts."""
    from rerag.data.fid_format import read_fid
    from rerag.infer.export import load_checkpoint

    sets = _re_sets(ws, ws.main(), top_k=UNANSWERABLE_TOP_K)
    pointwise = load_checkpoint(_pointwise(ws)["checkpoint"])[0]
    dense = _dense_world(ws)
    row_of = {pid: i for i, pid in enumerate(dense["ids"])}
    names = ('RE-RAG: max_j P("true")', 'MonoT5-style pointwise: max_j P("true")', "retriever: max_j cosine")
    out = {name: {} for name in names}
    for split, rows in sets.items():
        records = {r["id"]: (i, r) for i, r in enumerate(read_fid(ws.split_file(split)))}
        kept = []
        for r in rows:
            by_id = {c["id"]: c for c in records[r["id"]][1]["ctxs"]}
            kept.append([by_id[c["id"]] for c in r["contexts"]])
        s = pointwise.predict([(r["question"], c) for r, cs in zip(rows, kept) for c in cs]).split(
            [len(cs) for cs in kept]
        )
        cosine = [
            unanswerable.max_cosine(dense[split][records[r["id"]][0]], dense["corpus"][[row_of[c["id"]] for c in cs]])
            for r, cs in zip(rows, kept)
        ]
        out[names[0]][split] = rows
        out[names[1]][split] = [{**r, "confidence": float(scores.max().sigmoid())} for r, scores in zip(rows, s)]
        out[names[2]][split] = [{**r, "confidence": c} for r, c in zip(rows, cosine)]
    return out


def table3(ws: Workspace) -> Result:
    """Classifying the RE's top 25 as unanswerable (no context holds an answer) by confidence <
    threshold, the threshold searched on dev over 0.5..0.9 for the best F1 (paper §4.2): the RE's
    max_j P("true"), a MonoT5-style pointwise RE's and the retriever's cosine, every classifier on
    the same sets, beside calling every set unanswerable; F1's gain over that baseline and the
    confidence's AUROC (unanswerable as the positive class) beside."""
    from sklearn.metrics import roc_auc_score

    sets = _unanswerable_sets(ws)
    reports = {name: unanswerable.report(s["dev"], s["test"])["table3"] for name, s in sets.items()}
    labels = [not r["answerable"] for r in next(iter(sets.values()))["test"]]
    baseline = next(iter(reports.values()))["all_unanswerable"]
    rows, systems = [], {}
    for name, report in reports.items():
        c = report["classifier"]
        auroc = (
            roc_auc_score(labels, [-r["confidence"] for r in sets[name]["test"]])
            if 0 < sum(labels) < len(labels)
            else float("nan")
        )
        systems[name] = {**c, "f1_gain": c["f1"] - baseline["f1"], "auroc": float(auroc)}
        rows.append(
            [
                name,
                c["threshold"],
                100 * c["precision"],
                100 * c["recall"],
                100 * c["f1"],
                100 * systems[name]["f1_gain"],
                auroc,
            ]
        )
    rows.append(
        ["all unanswerable", "-", 100 * baseline["precision"], 100 * baseline["recall"], 100 * baseline["f1"], 0.0, "-"]
    )
    n, unanswerable_sets = len(labels), sum(labels)
    ours = 'RE-RAG: max_j P("true")'
    verdict = combined(
        *(
            by_direction(
                f"RE-RAG minus {other.split(':')[0]}, unanswerable F1",
                _f1_difference(sets[ours]["test"], sets[other]["test"], reports[ours], reports[other]),
                because=f"thresholds {reports[ours]['classifier']['threshold']:.1f} and "
                f"{reports[other]['classifier']['threshold']:.1f} on {unanswerable_sets} unanswerable sets of {n}",
            )
            for other in ('MonoT5-style pointwise: max_j P("true")', "retriever: max_j cosine")
        )
    )
    return Result(
        f"The RE's top {UNANSWERABLE_TOP_K} of each test question: {n} sets, {unanswerable_sets} without an answer; "
        "thresholds searched on dev over 0.5, 0.6, ..., 0.9.\n\n"
        + markdown_table(
            ["confidence", "threshold", "precision", "recall", "F1", "F1 - all unanswerable", "AUROC"], rows
        ),
        {"top_k": UNANSWERABLE_TOP_K, "questions": n, "unanswerable": unanswerable_sets, "systems": systems},
        differs="the retriever's cosine is all-MiniLM-L6-v2's, not FiD-KD's; every classifier reads the RE's sets",
        verdict=verdict,
    )


def _f1_difference(a: list[dict], b: list[dict], table_a: dict, table_b: dict) -> Difference:
    """F1 of "unanswerable" (confidence below the dev threshold of `table_a` / `table_b`) of one
    classifier's sets minus another's, paired by question."""

    def rows(sets: list[dict], table: dict) -> dict[str, list[float]]:
        threshold = table["classifier"]["threshold"]
        return {r["id"]: [float(r["confidence"] < threshold), float(not r["answerable"])] for r in sets}

    ours, theirs = rows(a, table_a), rows(b, table_b)
    ids = sorted(set(ours) & set(theirs))
    return paired_difference([ours[i] for i in ids], [theirs[i] for i in ids], f1_of_rows, scale=100)


def _accuracy(ws: Workspace, variants: dict[str, dict[str, list[dict]]], figure: str) -> Result:
    """Table 4 (or 12): accuracy on O and X before and after answering "unanswerable" below the dev
    threshold, for each confidence in `variants` (the paper's first), and the first's risk-coverage
    curve."""
    reports = {name: unanswerable.report(sets["dev"], sets["test"]) for name, sets in variants.items()}
    rows = [
        [name, r["threshold"], set_name, a["questions"], 100 * a["before"], 100 * a["after"]]
        for name, r in reports.items()
        for set_name, a in r["table4"].items()
    ]
    path = ws.path("re-rag", figure)
    unanswerable.plot_risk_coverage(path, next(iter(reports.values())))
    return Result(
        "Thresholds searched on dev over 0.5, 0.6, ..., 0.9.\n\n"
        + markdown_table(["confidence", "threshold", "set", "questions", "before", "after"], rows),
        {name: {"threshold": r["threshold"], "table4": r["table4"]} for name, r in reports.items()},
        [path],
    )


def _thresholding_gain(sets: dict[str, list[dict]]) -> dict[str, float]:
    """Per test question, Table 4's accuracy after answering "unanswerable" below the dev threshold
    minus before (+1 on a caught unanswerable set, -1 on a right answer withheld), by question id."""
    threshold = unanswerable.report(sets["dev"], sets["test"])["threshold"]
    withheld = unanswerable.UNANSWERABLE
    return {
        r["id"]: float(unanswerable.is_right(withheld, r)) - float(unanswerable.is_right(r["reader_answer"], r))
        if r["confidence"] < threshold
        else 0.0
        for r in sets["test"]
    }


def table4(ws: Workspace) -> Result:
    """Accuracy on the answerable (O) and unanswerable (X) test sets (the RE's top 25) before and after
    answering "unanswerable" below the dev threshold of max_j P("true"); X counts only
    "unanswerable" outputs as right."""
    sets = _re_sets(ws, ws.main(), top_k=UNANSWERABLE_TOP_K)
    result = _accuracy(ws, {'max_j P("true") (the paper\'s)': sets}, "table4_risk_coverage.png")
    result.verdict = thresholding_verdict(_thresholding_gain(sets))
    return result


def _withheld_and_caught(gain: dict[str, float]) -> str:
    """How thresholding changed answers: right answers withheld (-1) and unanswerable sets caught (+1)."""
    values = list(gain.values())
    return f"{values.count(-1.0)} right answers withheld, {values.count(1.0)} unanswerable sets caught"


def thresholding_verdict(gain: dict[str, float]) -> Verdict:
    """Table 4's verdict from each test question's accuracy after minus before thresholding."""
    values = list(gain.values())
    return by_direction(
        'RE max_j P("true") thresholding, test accuracy over O and X, after minus before',
        paired_difference(values, np.zeros(len(values)), scale=100),
        because=f"of {len(values)} questions, {_withheld_and_caught(gain)}",
    )


def _dense_sets(ws: Workspace) -> dict[str, list[dict]]:
    """Table 12's retriever as the paper's: the dense encoder's own top 25 of the world's corpus per dev
    and test question, its confidence max_j cosine clipped to [0, 1], answerable when one of the 25
    holds an answer (DPR's match on the passage text); on test, the main model's generator's answer
    reading them, marginalized with the cosines as weights, as the retriever baseline reads with
    its scores."""
    from erag.answers import has_answer
    from rerag.data.fid_format import read_fid
    from rerag.infer.export import load_checkpoint
    from rerag.infer.readers import RAGReader
    from rerag.reproduce.workspace import file_digest

    dense, corpus = _dense_world(ws), {}
    for line in (Path(ws.data_dir) / "corpus.jsonl").read_text().splitlines():
        passage = json.loads(line)
        corpus[str(passage["id"])] = passage
    sets = {}
    for split in ("dev", "test"):
        cosines = dense[split] @ dense["corpus"].T
        top = np.argsort(-cosines, axis=1, kind="stable")[:, :UNANSWERABLE_TOP_K]
        sets[split] = []
        for i, (record, ranked, row) in enumerate(zip(read_fid(ws.split_file(split)), top, cosines)):
            kept = [corpus[dense["ids"][j]] for j in ranked]
            sets[split].append(
                {
                    "id": record["id"],
                    "question": record["question"],
                    "answers": record["answers"],
                    "contexts": kept,
                    "weights": row[ranked].tolist(),
                    "confidence": unanswerable.max_cosine(dense[split][i], dense["corpus"][ranked]),
                    "answerable": any(has_answer(c["text"], record["answers"]) for c in kept),
                }
            )

    def read(folder: Path) -> dict:
        import torch

        generator = load_checkpoint(ws.main()["checkpoint"])[1]
        test = sets["test"]
        answers = RAGReader(generator.as_lm()).answer(
            [r["question"] for r in test], [r["contexts"] for r in test], [torch.tensor(r["weights"]) for r in test]
        )
        return {"answers": [a.text for a in answers]}

    key = [file_digest(ws.main()["checkpoint"]), UNANSWERABLE_TOP_K, file_digest(ws.split_file("test"))]
    for r, answer in zip(sets["test"], ws.step("dense_answers", key, read)["answers"]):
        r["reader_answer"] = answer
    return sets


def table12(ws: Workspace) -> Result:
    """Table 4 with the retriever's confidence over the retriever's own list (the dense encoder's top
    25 and its max_j cosine), at each of the paper's thresholds 0.5..0.9, and at the one searched on
    dev; the verdict compares the accuracy thresholding gains against the RE's (Table 4)."""
    dense = _dense_sets(ws)
    by_threshold = {t: unanswerable.accuracy_by_set(dense["test"], t) for t in unanswerable.THRESHOLDS}
    first = next(iter(by_threshold.values()))
    rows = [["before", *(100 * a.before for a in first.values())]]
    rows += [[f"{t:.1f}", *(100 * a.after for a in accuracy.values())] for t, accuracy in by_threshold.items()]
    result = _accuracy(ws, {"max_j cosine, the dense retriever's own top 25": dense}, "table12_risk_coverage.png")
    result.markdown = (
        "The dense retriever's top 25, accuracy by threshold:\n\n"
        + markdown_table(["threshold", *(f"{name}, {a.questions} sets" for name, a in first.items())], rows)
        + "\n\nAt the threshold searched on dev:\n\n"
        + result.markdown
    )
    result.data["by_threshold"] = {
        f"{t:.1f}": {name: a.after for name, a in accuracy.items()} for t, accuracy in by_threshold.items()
    }
    result.differs = "the dense encoder is all-MiniLM-L6-v2 over the world's corpus, not FiD-KD's retriever"
    re_gain = _thresholding_gain(_re_sets(ws, ws.main(), top_k=UNANSWERABLE_TOP_K))
    result.verdict = threshold_comparison_verdict(re_gain, _thresholding_gain(dense))
    return result


def threshold_comparison_verdict(re_gain: dict[str, float], cosine_gain: dict[str, float]) -> Verdict:
    """Table 12's verdict: the accuracy thresholding gains (Table 4's after minus before) with the
    RE's confidence minus with the retriever's cosine, paired by question."""
    ids = sorted(re_gain)
    return by_direction(
        "accuracy gained by thresholding (Table 4's after minus before), RE minus retriever cosine",
        paired_difference([re_gain[i] for i in ids], [cosine_gain[i] for i in ids], scale=100),
        because=f"the RE: {_withheld_and_caught(re_gain)}; the cosine: {_withheld_and_caught(cosine_gain)}",
    )


def _mixed(ws: Workspace, sets: dict[str, list[dict]]) -> Result:
    """Table 5 (or 11): below the dev threshold, a closed-book LM answers instead."""
    from rerag.infer.export import load_checkpoint
    from rerag.infer.readers import ParametricReader

    threshold, test = unanswerable.report(sets["dev"], sets["test"])["threshold"], sets["test"]
    if ws.llm:
        from erag.lm import load_lm

        reader = ParametricReader(load_lm(ws.llm))
    else:
        generator = load_checkpoint(ws.main()["checkpoint"])[1]
        reader = ParametricReader(generator.as_lm(), template=generator.template)
    parametric = reader([r["question"] for r in test])
    mixed = unanswerable.mixed_strategy(test, parametric, threshold)
    rows = [
        [unanswerable.MIXED_NAMES[name], 100 * mixed[name]["em"], 100 * mixed[name]["f1"]]
        for name in ("rerag", "llm_alone", "mixed")
    ]
    from erag.answers import exact_match

    switched = [
        exact_match(p, r["answers"]) - exact_match(r["reader_answer"], r["answers"])
        if r["confidence"] < threshold
        else 0
        for r, p in zip(test, parametric)
    ]
    ours = f"mixed minus RAG alone, test EM ({mixed['to_llm']} of {mixed['questions']} questions to the closed-book LM)"
    gain = paired_difference(switched, np.zeros(len(switched)), scale=100)
    verdict = (
        untestable(
            f"{ours}: {gain}", "the world is the project's generated one: no LM's parametric knowledge holds its facts"
        )
        if _synthetic(ws)
        else by_direction(ours, gain)
    )
    return Result(
        f"Threshold {threshold}; {mixed['to_llm']} of {mixed['questions']} test questions "
        "go to the closed-book LM.\n\n" + markdown_table(["system", "EM", "F1"], rows),
        mixed,
        differs=None
        if ws.llm
        else "no LLM given (--llm): the trained generator answers closed-book, and "
        "on a synthetic world it knows nothing, so this checks the mechanics only",
        verdict=verdict,
    )


def table5(ws: Workspace) -> Result:
    """The mixed strategy: below the dev threshold of the RE's confidence over its top 25, a
    closed-book LM answers instead of RE-RAG."""
    return _mixed(ws, _re_sets(ws, ws.main(), top_k=UNANSWERABLE_TOP_K))


def table11(ws: Workspace) -> Result:
    """Table 5 with the retriever's confidence (max_j cosine over its own top 25, as the paper's): the
    generator reads the dense retriever's top 25, and below the threshold the closed-book LM answers."""
    return _mixed(ws, _dense_sets(ws))


def _ablation(ws: Workspace, validate: bool = True, seed: int = 0, **switches: Any) -> dict:
    """The config trained for the scale's ablation steps, with one switch changed (none: the config itself)."""
    return ws.fit("ablation", steps=ws.scale.ablation_steps, validate=validate, seed=seed, **switches)


def _test_records(ws: Workspace) -> list[dict]:
    from rerag.data.fid_format import read_fid

    return list(read_fid(ws.split_file("test")))[: ws.scale.questions]


def table6(ws: Workspace) -> Result:
    """The effect of the RE, decomposed: the RAG baseline's generator (trained without the RE) reads
    the retriever's top k with its scores, with the RE's scores, the RE's top k with the retriever's
    scores, and the RE's top k with its scores; beside RE-RAG. The RE is RE-RAG's (the main model's);
    every row reads the same test questions; each of the scale's seeds trains both models again."""
    right = {name: [rows[name] for rows in map(lambda s: _rag_rows(ws, s), ws.scale.seeds)] for name in RAG_ROWS}
    em = {name: _mean(np.concatenate(r)) for name, r in right.items()}
    return Result(
        markdown_table(["model", f"test EM (seeds {list(ws.scale.seeds)})"], [[n, v] for n, v in em.items()]),
        {"em": em, "questions": len(right["baseline"][0]), "seeds": list(ws.scale.seeds), "top_k": ws.top_k},
        verdict=components_verdict(right, ws.main()["val"]),
    )


#: Table 6's rows: the ways a generator reads (`_rag_rows`).
RAG_ROWS = ("baseline", "baseline + RE score", "baseline + RE rerank", "baseline + RE rerank, score", "RE-RAG")


def components_verdict(right: dict[str, list[list[float]]], val: dict) -> Verdict:
    """Table 6's verdict, one part per use of the RE (its scores, its reranking, both), each minus the
    baseline on the same questions, pooled over the seeds (`right[row][s]`: seed s's per-question
    exact matches); the first seed's RE's dev Recall@1 and @10 against the retriever's beside."""
    parts = [
        by_direction(f"{name} minus baseline, test EM", pooled_difference(right[name], right["baseline"], scale=100))
        for name in RAG_ROWS[1:4]
    ]
    verdict = combined(*parts)
    verdict.why = f"{verdict.why}; {_recall_line(val, 'the RE')}"
    return verdict


def _recall_line(val: dict, who: str) -> str:
    """Dev Recall@1 and @10 of a run's RE against the retriever's order, from its last validation."""
    ks = [k for k in (1, 10) if f"val/re_recall@{k}" in val]
    return f"{who}: dev " + ", ".join(
        f"Recall@{k} {val[f'val/re_recall@{k}']:.3f} against the retriever's {val[f'val/retriever_recall@{k}']:.3f}"
        for k in ks
    )


def table7(ws: Workspace) -> Result:
    """Mean probability of "true" on answerable test contexts, for RE-RAG and for RE-RAG trained
    without eq. 3's normalization (s = log p_true): under the full vocabulary and normalized (eq. 3)."""
    import torch

    from rerag.infer.export import load_checkpoint

    means, per_context = {}, {}
    for name, switches in (("RE-RAG", {}), ("- normalization", {"loss.normalized": False})):
        p_true, pair, re = [], [], []
        for seed in ws.scale.seeds:
            run = _ablation(ws, validate=not switches, seed=seed, **switches)
            estimator, seeds_p_true = load_checkpoint(run["checkpoint"])[0], []
            with torch.no_grad():
                for r in _test_records(ws):
                    answerable = [c for c in r["ctxs"] if c.get("has_answer")]
                    if answerable:
                        enc = estimator.encode([r["question"]] * len(answerable), answerable)
                        log_t, log_f = estimator.true_false_logprobs(enc["input_ids"], enc["attention_mask"])
                        seeds_p_true += log_t.exp().tolist()
                        pair += (log_t.exp() + log_f.exp()).tolist()
                        re += torch.sigmoid(log_t - log_f).tolist()
            p_true.append(seeds_p_true)
        means[name] = {
            "p_true": float(np.mean(np.concatenate(p_true))),
            "pair_mass": float(np.mean(pair)),
            "re": float(np.mean(re)),
            "contexts": len(p_true[0]),
        }
        per_context[name] = p_true
    rows = [[name, f"{m['p_true']:.4f}", f"{m['re']:.4f}", m["contexts"]] for name, m in means.items()]
    return Result(
        markdown_table(["training", 'P("true"), full vocabulary', "RE (eq. 3)", "answerable contexts"], rows),
        {"means": means, "steps": ws.scale.ablation_steps, "seeds": list(ws.scale.seeds)},
        verdict=normalization_verdict(per_context, means),
    )


def normalization_verdict(per_context: dict[str, list[list[float]]], means: dict[str, dict]) -> Verdict:
    """Table 7's verdict: P("true") on answerable contexts without minus with eq. 3, paired by
    context and pooled over the seeds (`per_context[run][s]`); beside it, the share of the
    vocabulary's mass each RE keeps on the true/false pair."""
    mass = {name: 100 * m["pair_mass"] for name, m in means.items()}
    return by_direction(
        'without minus with normalization, mean P("true") on answerable test contexts',
        pooled_difference(per_context["- normalization"], per_context["RE-RAG"]),
        expected=-1,
        because=f"the true/false pair holds {mass['RE-RAG']:.3g}% of the vocabulary's mass with eq. 3, "
        f"{mass['- normalization']:.3g}% without",
    )


def figure2(ws: Workspace) -> Result:
    """Accuracy (EM) of the test questions binned by the paper's confidence, max_j P("true"), for REs of two sizes
    (the config's, and twice its width from random init; a pretrained RE, which exists in one size,
    also from random init at its own size), each trained as the config for the scale's ablation
    steps and read uncalibrated, as the paper reads its RE."""
    import yaml

    from rerag.models.loading import ModelSpec, architecture

    base = yaml.safe_load(ws.config.read_text())["model"]["estimator"]
    shape, pretrained = architecture(ModelSpec(**base)), base["config"] is None
    random_init = lambda config: {**base, "name_or_path": None, "config": config}  # noqa: E731
    wider = {**shape, **{k: 2 * shape[k] for k in ("d_model", "d_ff", "d_kv")}}
    runs = {f"RE d_model {shape['d_model']}" + (", pretrained" if pretrained else ""): _ablation(ws)}
    if pretrained:
        runs[f"RE d_model {shape['d_model']}, random init"] = _ablation(
            ws, validate=False, estimator=random_init(shape)
        )
    runs[f"RE d_model {wider['d_model']}, random init"] = _ablation(ws, validate=False, estimator=random_init(wider))
    edges = np.linspace(0.0, 1.0, 6)
    curves, counts = {}, {}
    for name, run in runs.items():
        test = ws.predictions(run, "test", ws.top_k, calibrated=False)
        confidence = np.array([p["confidence_raw"] for p in test])  # max_j P("true"), as the paper bins
        right = np.array([_em([p]) for p in test])
        bins = np.clip(np.digitize(confidence, edges[1:-1]), 0, len(edges) - 2)
        curves[name] = [float(right[bins == b].mean()) if (bins == b).any() else None for b in range(len(edges) - 1)]
        counts[name] = [int((bins == b).sum()) for b in range(len(edges) - 1)]
    centers = [round(float(c), 1) for c in (edges[:-1] + edges[1:]) / 2]
    path = plot_lines(
        centers,
        curves,
        ws.path("re-rag", "figure2_confidence_accuracy.png"),
        "Accuracy by confidence and RE size",
        'max_j P("true") (bin centre)',
        "test EM (%)",
    )
    rows = [
        [
            f"{edges[b]:.1f}-{edges[b + 1]:.1f}",
            *(("-" if curves[n][b] is None else f"{curves[n][b]:.1f} ({counts[n][b]})") for n in runs),
        ]
        for b in range(len(edges) - 1)
    ]
    return Result(
        "Test EM (questions) per confidence bin:\n\n" + markdown_table(["confidence", *runs], rows),
        {"bins": centers, "em": curves, "questions": counts},
        [path],
        differs="the paper varies the generator's size (LLMs); here the RE's width varies, the generator is the demo's",
        verdict=untestable(
            "EM by confidence bin for each RE: " + "; ".join(f"{n}: {_bins_line(curves[n])}" for n in runs),
            "the paper compares generators of several sizes (7B to 70B LLMs) by confidence; one generator here",
        ),
    )


def _bins_line(curve: list[float | None]) -> str:
    return " / ".join("-" if v is None else f"{v:.0f}" for v in curve)


def table8(ws: Workspace) -> Result:
    """Dev EM with and without L_re (alpha_re = 0), both trained for the scale's ablation steps and
    seeds: at the last validation of each fit, and reading the RE's top k of every dev question
    (`rerag predict-file`), per question for the paired interval pooled over the seeds."""
    from erag.answers import exact_match

    switches = {"RE-RAG": {}, "without L_re": {"loss.alpha_re": 0.0}}
    runs = {name: [_ablation(ws, seed=seed, **s) for seed in ws.scale.seeds] for name, s in switches.items()}
    em = {name: 100 * float(np.mean([run["val"]["val/em"] for run in seeds])) for name, seeds in runs.items()}
    right = {
        name: [
            [
                exact_match(p["reader_answer"], p["answers"])
                for p in ws.predictions(run, "dev", ws.top_k, calibrated=False)
            ]
            for run in seeds
        ]
        for name, seeds in runs.items()
    }
    read = {name: 100 * float(np.mean(np.concatenate(r))) for name, r in right.items()}
    rows = [[name, em[name], read[name]] for name in runs]
    rows.append(["difference", em["without L_re"] - em["RE-RAG"], read["without L_re"] - read["RE-RAG"]])
    return Result(
        markdown_table(["training", "dev EM (validation)", f"dev EM (RE's top {ws.top_k}, every question)"], rows),
        {"dev_em": em, "dev_em_top_k": read, "steps": ws.scale.ablation_steps, "seeds": list(ws.scale.seeds)},
        verdict=by_direction(
            f"without minus with L_re, dev EM reading the RE's top {ws.top_k}",
            pooled_difference(right["without L_re"], right["RE-RAG"], scale=100),
            expected=-1,
        ),
    )


TABLES = {
    "table1": table1,
    "table2": table2,
    "table3": table3,
    "table4": table4,
    "table5": table5,
    "figure2": figure2,
    "table6": table6,
    "table7": table7,
    "table8": table8,
    "table11": table11,
    "table12": table12,
}
