"""Rival rankings written as result rows (rerag.infer.rivals) and read by `rerag compare`."""

from __future__ import annotations

import json

import torch

from rerag.infer.compare import compare
from rerag.infer.rivals import result_rows, score_file
from tests.eor.conftest import encoder_dir, sentence_transformer_dir, tokenizer  # noqa: F401 (fixtures)


def record(i: int, gold_at: int) -> dict:
    ctxs = [
        {"id": f"p{j}", "title": "t", "text": f"passage {j}", "has_answer": j in (gold_at, 3), "gold": j == gold_at}
        for j in range(4)
    ]
    return {"id": f"q{i}", "question": f"question {i}", "answers": ["x"], "ctxs": ctxs}


def test_rows_rank_by_the_rival_and_by_the_file():
    rows = result_rows([record(0, 2)], [torch.tensor([0.1, 0.3, 0.9, 0.2])])
    assert rows[0]["first_hit"] == {"re": {"has_answer": 1, "gold": 1}, "retriever": {"has_answer": 3, "gold": 3}}
    assert [c["id"] for c in rows[0]["contexts"]] == ["p0", "p1", "p2", "p3"]
    rows = result_rows([record(0, 2)], [torch.tensor([0.9, 0.3, 0.1, 0.2])])  # the gold passage last
    assert rows[0]["first_hit"]["re"] == {"has_answer": 3, "gold": 4}  # order p0, p1, p3, p2


def test_a_file_without_gold_flags_ranks_by_has_answer_alone():
    r = record(0, 1)
    for c in r["ctxs"]:
        del c["gold"]
    rows = result_rows([r], [torch.tensor([0.0, 1.0, 0.0, 0.0])])
    assert rows[0]["first_hit"]["re"] == {"has_answer": 1}


def test_score_file_cuts_to_the_contexts_and_compares_beside_a_run(tmp_path):
    data = tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps(record(i, i % 4)) + "\n" for i in range(6)))
    seen = []

    def scorer(questions, contexts):  # ranks the gold passage first
        seen.append([len(cs) for cs in contexts])
        return [torch.tensor([float(c["gold"]) for c in cs]) for cs in contexts]

    summary = score_file(scorer, "oracle", data, tmp_path / "oracle.jsonl", contexts=3)
    assert seen == [[3] * 6] and summary["passages"] == 18 and summary["questions"] == 6
    assert json.loads((tmp_path / "oracle.summary.json").read_text())["rival"] == "oracle"
    first = score_file(scorer, "oracle", data, tmp_path / "first.jsonl", contexts=3, questions=4)
    assert first["questions"] == 4 and [
        json.loads(x)["id"] for x in (tmp_path / "first.jsonl").read_text().splitlines()
    ] == [f"q{i}" for i in range(4)]  # the file's first questions, as a test limited to its first batches reads
    # a test run's rows of the same questions that rank the gold passage second
    run = tmp_path / "run.jsonl"
    lines = []
    for i in range(6):
        hit = {"gold": 2, "has_answer": 1}
        lines.append({"id": f"q{i}", "first_hit": {"re": hit, "retriever": hit}, "em": 1.0, "f1": 1.0})
    run.write_text("".join(json.dumps(r) + "\n" for r in lines))
    report = compare({"oracle": tmp_path / "oracle.jsonl", "rerag": run}, ks=[1])
    assert "EM" not in report["systems"]["oracle"] and report["systems"]["rerag"]["EM"]["value"] == 1.0
    questions_with_gold = [i for i in range(6) if i % 4 < 3]  # the gold passage is among the first 3
    assert report["systems"]["oracle"]["gold R@1"]["value"] == len(questions_with_gold) / 6
    assert report["differences"]["rerag - oracle"]["gold R@1"]["value"] == -len(questions_with_gold) / 6


def test_dense_scores_are_cosines_of_the_encoders_embeddings(sentence_transformer_dir):
    from sentence_transformers import SentenceTransformer

    from rerag.infer.rivals import dense_scorer

    contexts = [[{"title": "t", "text": "anna lives here"}, {"title": "u", "text": "the guild is old"}], ["plain"]]
    scores = dense_scorer(str(sentence_transformer_dir))(["where does anna live?", "what?"], contexts)
    model = SentenceTransformer(str(sentence_transformer_dir), device="cpu")
    for question, cs, got in zip(["where does anna live?", "what?"], contexts, scores):
        q = torch.nn.functional.normalize(torch.as_tensor(model.encode([question])), dim=-1)[0]
        texts = [c if isinstance(c, str) else f"{c['title']}\n{c['text']}" for c in cs]
        p = torch.nn.functional.normalize(torch.as_tensor(model.encode(texts)), dim=-1)
        assert torch.allclose(got, p @ q, atol=1e-5)


def test_the_re_as_a_rival_scores_as_the_exported_re_does(export_dir):
    """`score-rival --rival re`: the exported RE's own s for each passage, so its cost is timed as UPR's."""
    from rerag.infer.rivals import estimator_scorer
    from rerag.models.estimator import RelevanceEstimator

    contexts = [[{"title": "t", "text": "anna lives here"}, {"title": "u", "text": "the guild is old"}], ["plain"]]
    questions = ["where does anna live?", "what?"]
    scores = estimator_scorer(str(export_dir / "estimator"))(questions, contexts)
    estimator = RelevanceEstimator.from_pretrained(export_dir / "estimator")
    for question, cs, got in zip(questions, contexts, scores):
        assert torch.allclose(got, estimator.score(question, cs), atol=1e-5)
