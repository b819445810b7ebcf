import json
import math

import lightning as L
import pytest
import torch

from rerag.cli import main
from rerag.data.datamodule import RERAGDataModule
from rerag.data.fid_format import read_fid
from rerag.infer.predict import JSONLWriter, predict
from rerag.infer.readers import RAGReader
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.module import RERAGModule


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_predictions_hold_confidence_contexts_and_strategy(export_dir, world_dir):
    estimator = RelevanceEstimator.from_pretrained(export_dir / "estimator")
    reader = RAGReader(Generator.from_pretrained(export_dir / "generator").as_lm(), marginalization="thorough")
    records = list(read_fid(world_dir / "dev.jsonl"))[:4]
    plain = list(predict(records, estimator, reader, top_k=4, batch_size=2))
    assert [p["id"] for p in plain] == [r["id"] for r in records]
    for p in plain:
        assert len(p["contexts"]) == 4 and p["decision"] == "reader" and p["answer"] == p["reader_answer"]
        assert p["confidence"] == pytest.approx(1 / (1 + math.exp(-max(c["re_score"] for c in p["contexts"]))))
        assert p["answerable"] == any(c["has_answer"] for c in p["contexts"])
        assert p["strategy"] == {
            "mode": "rag",
            "marginalization": "thorough",
            "num_beams": 1,
            "top_k": 4,
            "threshold": None,
            "fallback": "unanswerable",
        }

    # Every confidence is below 1.0: all abstain, or all go to the parametric fallback.
    abstained = list(predict(records, estimator, reader, top_k=4, threshold=1.0))
    assert all(p["answer"] == "unanswerable" and p["decision"] == "unanswerable" for p in abstained)
    assert [p["reader_answer"] for p in abstained] == [p["reader_answer"] for p in plain]
    fallback = list(
        predict(
            records,
            estimator,
            reader,
            top_k=4,
            threshold=1.0,
            fallback=lambda qs, cs: [f"closed-book {len(c)}" for c in cs],
        )
    )
    assert all(p["answer"] == "closed-book 0" and p["decision"] == "parametric" for p in fallback)


def test_predict_file_and_report_commands(export_dir, world_dir, tmp_path, capsys):
    for split in ("dev", "test"):
        small = tmp_path / f"{split}-5.jsonl"  # five questions keep the test quick
        small.write_text("\n".join((world_dir / f"{split}.jsonl").read_text().splitlines()[:5]) + "\n")
        main(
            [
                "predict-file",
                "--export_dir",
                str(export_dir),
                "--input",
                str(small),
                "--output",
                str(tmp_path / f"{split}.jsonl"),
                "--top_k",
                "3",
                "--mode",
                "ralm",
            ]
        )
    test = read_jsonl(tmp_path / "test.jsonl")
    assert len(test) == 5 and test[0]["strategy"]["mode"] == "ralm"
    main(
        [
            "unanswerable-report",
            "--dev",
            str(tmp_path / "dev.jsonl"),
            "--test",
            str(tmp_path / "test.jsonl"),
            "--out",
            str(tmp_path / "report"),
        ]
    )
    out = capsys.readouterr().out
    assert "(best)" in out and "(Table 3)" in out and "| answerable (O) |" in out and "| unanswerable (X) |" in out
    saved = json.loads((tmp_path / "report" / "unanswerable.json").read_text())
    assert saved["confidence"] == "uncalibrated" and saved["table3"]["questions"] == 5  # uncalibrated: sigmoid(s)
    assert (tmp_path / "report" / "risk_coverage.png").stat().st_size > 0


def test_lightning_predict_writes_jsonl(module_kwargs, data_kwargs, world_dir, tmp_path):
    torch.manual_seed(0)
    writer = JSONLWriter(str(tmp_path / "preds.jsonl"))
    data = RERAGDataModule(**data_kwargs, predict_file=str(world_dir / "test.jsonl"))
    trainer = L.Trainer(
        accelerator="cpu", logger=False, callbacks=[writer], enable_progress_bar=False, enable_model_summary=False
    )
    trainer.predict(RERAGModule(**module_kwargs), datamodule=data, return_predictions=False)
    rows = read_jsonl(tmp_path / "preds.jsonl")
    assert [r["id"] for r in rows] == [f"test-{i}" for i in range(12)]
    assert all(0.0 < r["confidence"] < 1.0 and len(r["contexts"]) == 3 for r in rows)
