"""rerag.data.ir_formats: a BEIR folder and a TREC run in, FiD records through rerank, a TREC run and
eRAG's qrels out, and the IR library (ir-measures) scoring them as rerag does."""

import json

import ir_measures
import pytest
import torch

from erag.retrieval_metrics import score_labels
from rerag.data.fid_format import FiDFormatError, read_fid
from rerag.data.ir_formats import beir_to_fid, read_qrels, read_trec_run, strictly_decreasing, write_qrels
from rerag.infer.rerank import rerank_file
from rerag.integrations.erag_evaluation import erag_qrels, rank_records
from rerag.metrics import recall_at_k
from rerag.models.estimator import RelevanceEstimator


def write_beir(world_dir, out):
    """The tiny world's test split as a BEIR folder (qrels: has_answer) and BM25's order as a TREC run."""
    records = list(read_fid(world_dir / "test.jsonl"))
    corpus = {c["id"]: c for r in records for c in r["ctxs"]}
    (out / "qrels").mkdir(parents=True)
    (out / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": c["title"], "text": c["text"]}) + "\n" for i, c in corpus.items())
    )
    (out / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": r["id"], "text": r["question"], "metadata": {"answers": r["answers"]}}) + "\n"
            for r in records
        )
    )
    rows = [f"{r['id']}\t{c['id']}\t1" for r in records for c in r["ctxs"] if c["has_answer"]]
    (out / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    run = [f"{r['id']} Q0 {c['id']} {j + 1} {c['score']} bm25" for r in records for j, c in enumerate(r["ctxs"])]
    (out / "run.txt").write_text("\n".join(run) + "\n")
    return records


def test_a_beir_folder_and_a_run_become_the_fid_records_they_came_from(world_dir, tmp_path):
    records = write_beir(world_dir, tmp_path / "beir")
    converted = beir_to_fid(tmp_path / "beir", tmp_path / "beir" / "run.txt", k=5)
    by_id = {r["id"]: r for r in records}
    assert [r["id"] for r in converted] == [r["id"] for r in records if any(c["has_answer"] for c in r["ctxs"])]
    for record in converted:
        source = sorted(by_id[record["id"]]["ctxs"], key=lambda c: -c["score"])[:5]
        assert record["answers"] == by_id[record["id"]]["answers"]
        assert [c["id"] for c in record["ctxs"]] == [c["id"] for c in source]
        assert [c["has_answer"] for c in record["ctxs"]] == [c["has_answer"] for c in source]


def test_the_corpus_is_read_line_by_line_keeping_only_the_runs_documents(world_dir, tmp_path, monkeypatch):
    """Documents the run does not name are validated and dropped as they are read, so memory holds the
    run's documents only; the records are those of the corpus without them."""
    import rerag.data.ir_formats as ir_formats

    write_beir(world_dir, tmp_path / "beir")
    before = beir_to_fid(tmp_path / "beir", tmp_path / "beir" / "run.txt")
    corpus = tmp_path / "beir" / "corpus.jsonl"
    named = {line.split()[2] for line in (tmp_path / "beir" / "run.txt").read_text().splitlines()}
    unnamed = [json.dumps({"_id": f"extra-{i}", "title": "", "text": "x " * 50}) + "\n" for i in range(500)]
    corpus.write_text(corpus.read_text() + "".join(unnamed))
    kept = []
    read = ir_formats._jsonl
    monkeypatch.setattr(ir_formats, "_jsonl", lambda *a, **k: kept.append(read(*a, **k)) or kept[-1])
    assert beir_to_fid(tmp_path / "beir", tmp_path / "beir" / "run.txt") == before
    assert set(kept[0]) == named  # the corpus, as held: the run's documents alone
    corpus.write_text(corpus.read_text() + '{"_id": "extra-bad", "title": ""}\n')
    lines = len(corpus.read_text().splitlines())
    with pytest.raises(FiDFormatError, match=rf"corpus.jsonl, line {lines}: field 'text'"):
        beir_to_fid(tmp_path / "beir", tmp_path / "beir" / "run.txt")


def test_a_run_reranked_by_rerag_scores_in_ir_measures_as_rerag_does(world_dir, export_dir, tmp_path):
    """BEIR + run -> FiD -> `rerag rerank` -> TREC run: ir-measures' Success@k of the run against the
    qrels equals rerag's own Recall@k (a hit rate) of the RE's scores."""
    write_beir(world_dir, tmp_path / "beir")
    fid = tmp_path / "bm25.jsonl"
    fid.write_text("".join(json.dumps(r) + "\n" for r in beir_to_fid(tmp_path / "beir", tmp_path / "beir" / "run.txt")))
    estimator = RelevanceEstimator.from_pretrained(export_dir / "estimator")
    rerank_file(estimator, fid, tmp_path / "reranked.jsonl", trec_run=tmp_path / "re.run")
    reranked = [json.loads(line) for line in (tmp_path / "reranked.jsonl").read_text().splitlines()]

    ks = [1, 3, 5]
    ours = recall_at_k(ks)
    for i, record in enumerate(reranked):
        scores = torch.tensor([c["re_score"] for c in record["ctxs"]])
        relevant = torch.tensor([c["has_answer"] for c in record["ctxs"]])
        ours.update(scores, relevant, indexes=torch.full_like(relevant, i, dtype=torch.long))
    write_qrels(tmp_path / "test.qrels", read_qrels(tmp_path / "beir" / "qrels" / "test.tsv"))  # BEIR's TSV as TREC's
    qrels = list(ir_measures.read_trec_qrels(str(tmp_path / "test.qrels")))
    theirs = ir_measures.calc_aggregate(
        [ir_measures.Success @ k for k in ks], qrels, ir_measures.read_trec_run(str(tmp_path / "re.run"))
    )
    got = ours.compute()
    for k in ks:
        assert float(got[f"recall@{k}"]) == pytest.approx(theirs[ir_measures.Success @ k], abs=1e-9), k
    written = read_trec_run(tmp_path / "re.run")
    for record in reranked:
        scores = [s for _, s in written[record["id"]]]
        assert all(a > b for a, b in zip(scores, scores[1:]))  # strictly decreasing: no tie for a tool to break


def test_erag_qrels_give_ir_measures_the_mrr_erag_computes(world_dir, tmp_path):
    records = list(read_fid(world_dir / "test.jsonl"))
    results, _ = rank_records(records, None, top_k=6)
    labels = {qid: [float((len(qid) * 7 + i + j) % 4 == 0) for j in range(6)] for i, qid in enumerate(results)}
    write_qrels(tmp_path / "erag.qrels", erag_qrels(results, labels, threshold=0.5))
    run = [f"{qid} Q0 {d} {j + 1} {10 - j} erag" for qid, r in results.items() for j, d in enumerate(r["document_ids"])]
    (tmp_path / "order.run").write_text("\n".join(run) + "\n")
    theirs = ir_measures.calc_aggregate(
        [ir_measures.RR],
        ir_measures.read_trec_qrels(str(tmp_path / "erag.qrels")),
        ir_measures.read_trec_run(str(tmp_path / "order.run")),
    )
    assert score_labels(labels, ["MRR"])["aggregated"]["MRR"] == pytest.approx(theirs[ir_measures.RR], abs=1e-6)
    assert read_qrels(tmp_path / "erag.qrels") == erag_qrels(results, labels, 0.5)


def test_ties_are_nudged_down_and_keep_their_order():
    assert strictly_decreasing([3.0, 2.0, 2.0, 2.0, 1.0])[1:4] == sorted(
        strictly_decreasing([3.0, 2.0, 2.0, 2.0, 1.0])[1:4], reverse=True
    )
    nudged = strictly_decreasing([2.0, 2.0, 2.0])
    assert nudged[0] == 2.0 and nudged[0] > nudged[1] > nudged[2] > 1.9999


def break_run(tmp_path, edit):
    lines = (tmp_path / "beir" / "run.txt").read_text().splitlines()
    (tmp_path / "beir" / "run.txt").write_text("\n".join(edit(lines)) + "\n")


@pytest.mark.parametrize(
    "edit, error",
    [
        (lambda lines: [lines[0].rsplit(" ", 1)[0], *lines[1:]], "run.txt, line 1: a run line has 6 fields"),
        (lambda lines: [lines[0], lines[0], *lines[1:]], "run.txt, line 2: field 'docid': 'p167' is listed twice"),
        (
            lambda lines: [lines[0].replace("p167", "nowhere"), *lines[1:]],
            "run.txt, line 1: field 'docid': 'nowhere' is not in",
        ),
        (
            lambda lines: [line for line in lines if not line.startswith("test-0 ")],
            "test.tsv: field 'query-id': 1 queries have no line in",
        ),
        (
            lambda lines: [lines[0].replace(" 1 3.66", " 1 high"), *lines[1:]],
            "run.txt, line 1: field 'rank/score': not numbers",
        ),
    ],
)
def test_a_bad_run_names_the_file_the_line_and_the_field(world_dir, tmp_path, edit, error):
    write_beir(world_dir, tmp_path / "beir")
    break_run(tmp_path, edit)
    with pytest.raises(FiDFormatError, match=error):
        beir_to_fid(tmp_path / "beir", tmp_path / "beir" / "run.txt")


def test_a_bad_qrels_line_and_an_answerless_file_for_erag_are_named(world_dir, tmp_path):
    (tmp_path / "bad.qrels").write_text("q1 0 d1 1\nq1 d2\n")
    with pytest.raises(FiDFormatError, match=r"bad.qrels, line 2: a qrels line has 4 fields"):
        read_qrels(tmp_path / "bad.qrels")
    (tmp_path / "bad2.qrels").write_text("q1 0 d1 yes\n")
    with pytest.raises(FiDFormatError, match=r"bad2.qrels, line 1: field 'relevance': not an integer"):
        read_qrels(tmp_path / "bad2.qrels")
    records = write_beir(world_dir, tmp_path / "beir")
    for line in (tmp_path / "beir" / "queries.jsonl").read_text().splitlines():
        assert json.loads(line)["metadata"]["answers"]
    answerless = [{**r, "answers": []} for r in records[:2]]
    (tmp_path / "answerless.jsonl").write_text("".join(json.dumps(r) + "\n" for r in answerless))
    with pytest.raises(FiDFormatError, match=r"answerless.jsonl, line 1: field 'answers'"):
        list(read_fid(tmp_path / "answerless.jsonl"))  # what `rerag eor` and `rerag erag` read
