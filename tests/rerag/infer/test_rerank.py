import json
import math

import pytest
import torch

from rerag.cli import main
from rerag.data.fid_format import FiDFormatError, read_fid
from rerag.infer.rerank import rerank, rerank_file
from rerag.models.estimator import RelevanceEstimator


def test_rerank_file_sorts_cuts_and_scores(export_dir, world_dir, tmp_path):
    estimator = RelevanceEstimator.from_pretrained(export_dir / "estimator")
    main(
        [
            "rerank",
            "--estimator",
            str(export_dir / "estimator"),
            "--input",
            str(world_dir / "dev.jsonl"),
            "--output",
            str(tmp_path / "dev.jsonl"),
            "--top_k",
            "5",
            "--batch_size",
            "7",
        ]
    )
    originals = list(read_fid(world_dir / "dev.jsonl"))
    reranked = list(read_fid(tmp_path / "dev.jsonl"))  # still valid FiD
    raw = [json.loads(line) for line in (tmp_path / "dev.jsonl").read_text().splitlines()]
    assert [r["id"] for r in raw] == [r["id"] for r in originals] and len(reranked) == len(originals)
    for record, original in zip(raw, originals):
        s = estimator.score(original["question"], original["ctxs"])
        expected = torch.argsort(s, descending=True, stable=True)[:5]
        assert [c["id"] for c in record["ctxs"]] == [original["ctxs"][j]["id"] for j in expected]
        for c, j in zip(record["ctxs"], expected.tolist()):
            assert c["re_score"] == pytest.approx(s[j].item(), abs=1e-5)
            assert c["re_prob"] == pytest.approx(1 / (1 + math.exp(-c["re_score"])), abs=1e-6)
            assert c["score"] == pytest.approx(original["ctxs"][j]["score"])  # the retriever's score stays


def test_fewer_contexts_than_top_k_keeps_them_all(export_dir, world_dir, tmp_path):
    estimator = RelevanceEstimator.from_pretrained(export_dir / "estimator")
    n = rerank_file(estimator, world_dir / "dev.jsonl", tmp_path / "dev.json", top_k=1000)  # .json: a JSON list
    records = json.loads((tmp_path / "dev.json").read_text())
    assert n == len(records) and all(len(r["ctxs"]) == 12 for r in records)
    scores = [c["re_score"] for c in records[0]["ctxs"]]
    assert scores == sorted(scores, reverse=True)


def test_empty_questions_are_errors(export_dir, tmp_path):
    estimator = RelevanceEstimator.from_pretrained(export_dir / "estimator")
    with pytest.raises(ValueError, match="record id 'q1': the question is empty"):
        list(rerank(estimator, [{"id": "q1", "question": " ", "ctxs": [{"text": "x"}]}], top_k=3))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "q1", "question": "", "ctxs": [{"text": "x"}]}) + "\n")
    with pytest.raises(FiDFormatError, match="line 1: field 'question'"):
        rerank_file(estimator, bad, tmp_path / "out.jsonl")


def test_rerank_in_bfloat16_stays_close_to_float32(export_dir, world_dir, tmp_path):
    outputs = {}
    for dtype in ("float32", "bfloat16"):
        main(
            [
                "rerank",
                "--estimator",
                str(export_dir / "estimator"),
                "--input",
                str(world_dir / "dev.jsonl"),
                "--output",
                str(tmp_path / f"{dtype}.jsonl"),
                "--dtype",
                dtype,
                "--device",
                "cpu",
            ]
        )
        rows = [json.loads(line) for line in (tmp_path / f"{dtype}.jsonl").read_text().splitlines()]
        outputs[dtype] = {(r["id"], c["id"]): c["re_score"] for r in rows for c in r["ctxs"]}
    assert outputs["float32"].keys() == outputs["bfloat16"].keys()
    diffs = [abs(outputs["float32"][k] - outputs["bfloat16"][k]) for k in outputs["float32"]]
    assert 0 < max(diffs) < 0.25  # bf16 weights change s a little (s itself is computed in float32)
