import json

import pytest
import yaml

from rerag.cli import main
from rerag.reproduce import REGISTRY, document, paper_numbers, selected
from rerag.reproduce.workspace import Workspace

#: Every table and figure of the three papers, per paper.
NAMED = {
    "re-rag": {
        "table1",
        "table2",
        "table3",
        "table4",
        "table5",
        "figure2",
        "table6",
        "table7",
        "table8",
        "table11",
        "table12",
    },
    "eor": {"table1", "table2", "table4", *(f"figure{i}" for i in range(1, 7))},
    "erag": {"table1", "table2", "figure1", "figure2", "figure3"},
}


def test_every_named_table_is_registered_with_the_papers_numbers():
    numbers = paper_numbers()
    for paper, names in NAMED.items():
        assert set(REGISTRY[paper]) == names
        for name in names:
            entry = numbers[paper][name]
            assert entry["title"] and entry["setting"]
            assert entry["numbers"] or entry["missing"], f"{paper} {name}: neither numbers nor why they are missing"


def test_an_unknown_table_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"table99.*re-rag: table1, table2"):
        selected("re-rag", ["table2", "table99"])
    assert selected("all", ["table2"]) == [("re-rag", "table2"), ("eor", "table2"), ("erag", "table2")]


def test_tables_are_positional_on_the_command_line(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "re-rag", "table2", "figure2", "--scale", "toy", "--print_config"])
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["paper"] == "re-rag" and config["tables"] == ["table2", "figure2"] and config["scale"] == "toy"


def test_a_step_runs_once_per_settings_and_is_read_back_after(tmp_path):
    calls = []
    ws = Workspace(tmp_path, "toy")
    run = lambda folder: calls.append(folder) or {"value": len(calls)}  # noqa: E731
    first = ws.step("x", {"a": 1}, run)
    again = Workspace(tmp_path, "toy").step("x", {"a": 1}, run)
    other = ws.step("x", {"a": 2}, run)
    assert len(calls) == 2 and first == again and first["value"] == 1 and other["value"] == 2
    assert [u["reused"] for u in ws.used] == [False, False]


@pytest.mark.slow
def test_toy_reproduction_of_one_table_per_paper(tmp_path, monkeypatch):
    """`rerag reproduce` at toy scale: a trained model, the EoR run and the eRAG run, each table's
    Markdown and JSON, and REPRODUCTION.md beside the papers' numbers; a rerun reuses every run."""
    out, doc = tmp_path / "out", tmp_path / "REPRODUCTION.md"
    args = ["--scale", "toy", "--out", str(out), "--doc", str(doc)]
    main(["reproduce", "all", "table1", "figure2", *args])
    main(["reproduce", "re-rag", "table2", *args])
    index = json.loads((out / "index.json").read_text())
    recall = json.loads((out / "re-rag" / "table2.json").read_text())["data"]
    assert {"retriever (list order)", "RE, whole list", "RE, top10", "MonoT5-style pointwise RE, whole list"} <= set(
        recall
    )
    assert all(0 <= v <= 100 for row in recall.values() for v in row.values())
    for paper, png in (
        ("re-rag", "figure2_confidence_accuracy"),
        ("eor", "figure2_mrlr"),
        ("erag", "figure2_reader_size"),
    ):
        assert index[paper]["figure2"]["figures"] == [str(out / paper / f"{png}.png")]
        assert (out / paper / f"{png}.png").stat().st_size > 0
    em = json.loads((out / "re-rag" / "table1.json").read_text())["data"]["em"]
    assert len(em) == 5 and all(0 <= v <= 100 for v in em.values())
    eor = json.loads((out / "eor" / "table1.json").read_text())["data"]
    assert set(eor["retriever_em"]) == {"BM25@5", "Dense@5", "BM25@RR@5", "BM25@3&Dense@3", "ReFree"}
    assert (eor["num_train"], eor["num_test"]) == (8, 8)  # weights from 8 dev questions, reported on 8 test ones
    erag = json.loads((out / "erag" / "table1.json").read_text())["data"]
    assert set(erag) == {"retriever", "re"} and "erag" in erag["re"]["correlation"]

    assert len(list((out / "runs").glob("rerag-*"))) == 1  # one main model serves the three papers
    text = doc.read_text()
    for paper, name in (("re-rag", "table1"), ("re-rag", "table2"), ("eor", "table1"), ("erag", "table1")):
        assert f"`rerag reproduce {paper} {name} --scale toy`" in text
    assert "| NQ | RE-RAG_base | 59.5 | 77.8 | 82.7 | 85.5 |" in text  # the paper's Table 2 beside ours
    sections = {part.split(":")[0]: part for part in text.split("### ")}
    assert "| RE-RAG generator |" in sections["Ensemble of Retrievers Figure 2"]  # its pool's MRLR
    assert "**Ours** (`rerag reproduce re-rag figure2 --scale toy`" in sections["RE-RAG Figure 2"]
    for paper, tables in index.items():  # each made table says whether it reproduces its finding
        for name, entry in tables.items():
            assert entry["verdict"]["reproduced"] in {"yes", "no", "inconclusive", "partly", "not testable here"}, (
                paper,
                name,
            )
            assert f"| {entry['verdict']['ours'].replace('|', '/')} |" in text.split("## Verdicts")[1]

    runs = {path: path.stat().st_mtime_ns for path in (out / "runs").rglob("*") if path.is_file()}
    recomputed = []
    step = Workspace.step

    def counted(self, name, key, run):
        return step(self, name, key, lambda folder: recomputed.append(name) or run(folder))

    monkeypatch.setattr(Workspace, "step", counted)
    main(["reproduce", "re-rag", "table2", *args])  # everything it needs is cached
    again = json.loads((out / "index.json").read_text())["re-rag"]["table2"]
    assert again["runs"] and all(r["reused"] for r in again["runs"]) and recomputed == []
    assert {path: path.stat().st_mtime_ns for path in (out / "runs").rglob("*") if path.is_file()} == runs
    assert json.loads((out / "re-rag" / "table2.json").read_text())["data"] == recall


def test_document_lists_tables_not_run_yet(tmp_path):
    text = document({}, str(tmp_path))
    verdicts, sections = text.split("\n## RE-RAG\n", 1)
    assert sections.count("not run yet") == verdicts.count("**not run yet**") == sum(map(len, NAMED.values()))


def test_a_workspace_names_the_options_that_made_it(tmp_path):
    """A table's command in REPRODUCTION.md must rerun it: the options beyond the scale go with it."""
    assert Workspace(tmp_path, "quick").options() == ""
    assert Workspace(tmp_path, "quick", config="configs/demo.yaml").options() == ""
    made = Workspace(tmp_path, "quick", config="configs/squad_smollm2.yaml", top_k=3, llm="some/lm")
    assert made.options() == " --fit_config configs/squad_smollm2.yaml --top_k 3 --llm some/lm"


def test_erag_figure1_plots_each_labelings_best_metric_of_table1():
    from rerag.reproduce.erag_tables import best_metrics

    correlation = {
        "erag": {"P@10": {"kendall_tau": 0.2}, "MAP": {"kendall_tau": 0.5}, "NDCG@10": {"undefined": "constant"}},
        "contains_answer": {"P@10": {"kendall_tau": 0.3}, "R@10": {"kendall_tau": 0.1}},
        "judge": {"P@10": {"undefined": "constant"}},
    }
    assert best_metrics(correlation, 10) == {"erag": "MAP", "contains_answer": "P@{k}"}


def test_a_step_on_a_checkpoint_reruns_when_its_weights_change(tmp_path):
    """A model retrained into the same path must not reuse the old model's results."""
    from rerag.reproduce.workspace import file_digest

    ckpt, calls = tmp_path / "best.ckpt", []
    ws = Workspace(tmp_path / "out", "toy")
    run = lambda folder: calls.append(folder) or {}  # noqa: E731
    ckpt.write_bytes(b"weights one")
    ws.step("eor", [str(ckpt), file_digest(ckpt)], run)
    ws.step("eor", [str(ckpt), file_digest(ckpt)], run)
    ckpt.write_bytes(b"weights two")
    ws.step("eor", [str(ckpt), file_digest(ckpt)], run)
    assert len(calls) == 2
