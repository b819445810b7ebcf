"""benchmarks/folds.py: a fold's configs read its own data and write its own outputs, and the table
compares the committed folds' systems on each fold's questions."""

import importlib.util
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("folds", ROOT / "benchmarks" / "folds.py")
folds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(folds)


def test_a_folds_configs_move_data_and_outputs_only():
    base = (ROOT / "configs" / "squad_smollm2_base.yaml").read_text()
    overlay = (ROOT / "configs" / "squad_smollm2.yaml").read_text()
    new_base, new_overlay = folds.fold_configs(base, overlay, "data/fold_sky", "outputs/fold_sky")
    b, o = yaml.safe_load(new_base), yaml.safe_load(new_overlay)
    files = b["data"]["init_args"]
    assert [files[k] for k in ("train_file", "val_file", "test_file")] == [
        "data/fold_sky/train.jsonl",
        "data/fold_sky/dev.jsonl",
        "data/fold_sky/test.jsonl",
    ]
    assert o["trainer"]["default_root_dir"] == "outputs/fold_sky"
    assert all("outputs/squad_smollm2" not in json.dumps(c) for c in o["trainer"]["callbacks"])
    assert b["model"] == yaml.safe_load(base)["model"] and o["model"] == yaml.safe_load(overlay)["model"]
    assert folds.fold_name("Sky_(United_Kingdom)") == "sky" and folds.fold_name("Normans") == "normans"


def rows(gold_ranks, em, retriever_rank=2):
    return [
        {
            "id": f"q{i}",
            "first_hit": {
                "re": {"gold": g, "has_answer": g},
                "retriever": {"gold": retriever_rank, "has_answer": retriever_rank},
            },
            **({"em": e, "f1": e, "em_retriever_order": 0.0, "f1_retriever_order": 0.5} if e is not None else {}),
        }
        for i, (g, e) in enumerate(zip(gold_ranks, em))
    ]


def write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_the_table_compares_a_folds_systems(tmp_path):
    n = 10
    write(tmp_path / "test_results.jsonl", rows([1] * 8 + [3] * 2, [1.0] * 5 + [0.0] * 5))  # trained RE
    write(tmp_path / "zero_shot" / "test_results.jsonl", rows([3] * n, [0.0] * n))
    write(tmp_path / "upr.jsonl", rows([1] * 9 + [2], [None] * n))  # ranks only
    write(tmp_path / "dense.jsonl", rows([2] * n, [None] * n))
    (tmp_path / "fold.json").write_text(json.dumps({"test_article": "Sky_(United_Kingdom)", "seconds": {"fit": 5.0}}))
    for rival, ms in (("re", 12.5), ("upr", 88.0)):  # the dense rival's cost not measured: an empty cell
        (tmp_path / f"{rival}.summary.json").write_text(json.dumps({"rival": rival, "ms_per_passage": ms}))
    report = folds.fold_report(tmp_path)
    assert report["systems"]["UPR"]["gold R@1"]["value"] == 0.9
    assert report["differences"]["RE-RAG - UPR"]["gold R@1"]["value"] == -0.1
    assert report["differences"]["RE-RAG - retriever"]["gold R@1"]["value"] == 0.8
    text = folds.table([report])
    row = text.splitlines()[2]
    assert row.startswith("| Sky_(United_Kingdom) (10) | 0.800 | 0.000 | 0.900 | 0.000 | 0.000 | +0.800")
    assert "| 0.500 / 0.500 | 0.000 / 0.500 | 0.000 / 0.000 |" in row and row.endswith("| 5.0 | 12.5 / 88.0 /  |")
