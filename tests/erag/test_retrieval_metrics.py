"""Retrieval metrics over eRAG labels, checked against values computed by hand."""

import math

import pytest

from erag.retrieval_metrics import parse_metric, score_labels

LOG2_3 = math.log2(3)


def test_binary_labels_match_hand_computed_values():
    labels = {"q1": [1, 0, 1, 0, 0], "q2": [0, 0, 0, 1, 0], "q3": [0, 0, 0, 0, 0]}
    result = score_labels(labels, ["P@2", "P@10", "R@2", "MAP", "MRR", "NDCG@3", "Hit@3", "Hit@5"])
    expected = {
        "q1": {
            "P@2": 1 / 2,
            "P@10": 2 / 10,
            "R@2": 1 / 2,
            "MAP": (1 + 2 / 3) / 2,
            "MRR": 1.0,
            "NDCG@3": (1 + 1 / 2) / (1 + 1 / LOG2_3),
            "Hit@3": 1.0,
            "Hit@5": 1.0,
        },
        "q2": {
            "P@2": 0.0,
            "P@10": 1 / 10,
            "R@2": 0.0,
            "MAP": 1 / 4,
            "MRR": 1 / 4,
            "NDCG@3": 0.0,
            "Hit@3": 0.0,
            "Hit@5": 1.0,
        },
        "q3": {name: 0.0 for name in ["P@2", "P@10", "R@2", "MAP", "MRR", "NDCG@3", "Hit@3", "Hit@5"]},
    }
    for qid, values in expected.items():
        assert result["per_query"][qid] == pytest.approx(values, abs=1e-6)
    means = {name: sum(expected[q][name] for q in expected) / 3 for name in expected["q1"]}
    assert result["aggregated"] == pytest.approx(means, abs=1e-6)


def test_recall_denominator_is_relevant_documents_in_the_retrieved_list():
    # 3 relevant among the retrieved; the top 2 hold 1 of them.
    assert score_labels({"q": [0, 1, 1, 1]}, ["R@2"])["per_query"]["q"]["R@2"] == pytest.approx(1 / 3)


def test_map_cut_divides_by_all_relevant_documents_as_trec_eval():
    # trec_eval map_cut.k: (sum of precision@i at relevant ranks i <= k) / R, R = 3 relevant in the list.
    # Dividing by the relevant documents in the top k would give 1/2 (and by min(k, R), 1/4).
    result = score_labels({"q": [0, 1, 1, 1], "r": [1, 0, 0, 1]}, ["MAP@2", "MAP@3", "MAP"])["per_query"]
    assert result["q"] == pytest.approx(
        {"MAP@2": (1 / 2) / 3, "MAP@3": (1 / 2 + 2 / 3) / 3, "MAP": (1 / 2 + 2 / 3 + 3 / 4) / 3}
    )
    assert result["r"] == pytest.approx({"MAP@2": 1 / 2, "MAP@3": 1 / 2, "MAP": (1 + 2 / 4) / 2})


def test_graded_labels_use_mean_for_precision_and_max_for_hit():
    labels = {"q1": [0.5, 1.0, 0.0], "q2": [0.0, 0.0, 0.2], "q3": [0.8, 0.8, 0.8]}
    result = score_labels(labels, ["P@2", "Hit@2", "NDCG@2", "NDCG", "P"])
    expected = {
        "q1": {
            "P@2": 0.75,
            "Hit@2": 1.0,
            "NDCG@2": (0.5 + 1 / LOG2_3) / (1 + 0.5 / LOG2_3),
            "NDCG": (0.5 + 1 / LOG2_3) / (1 + 0.5 / LOG2_3),
            "P": 0.5,
        },
        "q2": {"P@2": 0.0, "Hit@2": 0.0, "NDCG@2": 0.0, "NDCG": (0.2 / 2) / 0.2, "P": 0.2 / 3},
        "q3": {"P@2": 0.8, "Hit@2": 0.8, "NDCG@2": 1.0, "NDCG": 1.0, "P": 0.8},
    }
    for qid, values in expected.items():
        assert result["per_query"][qid] == pytest.approx(values, abs=1e-6)
    assert result["aggregated"]["P@2"] == pytest.approx((0.75 + 0 + 0.8) / 3)
    assert result["aggregated"]["Hit@2"] == pytest.approx((1.0 + 0 + 0.8) / 3)


def test_graded_labels_need_a_threshold_for_binary_only_metrics():
    labels = {"q1": [0.5, 1.0, 0.0], "q2": [0.0, 0.0, 0.2]}
    with pytest.raises(ValueError, match=r"MAP needs binary relevance labels.*'q1'.*relevance_threshold"):
        score_labels(labels, ["MAP"])
    result = score_labels(labels, ["MAP", "MRR", "R@1"], relevance_threshold=0.5)
    assert result["per_query"]["q1"] == pytest.approx({"MAP": 1.0, "MRR": 1.0, "R@1": 0.5})
    assert result["per_query"]["q2"] == pytest.approx({"MAP": 0.0, "MRR": 0.0, "R@1": 0.0})


def test_label_outside_unit_interval_names_query_and_document():
    with pytest.raises(ValueError, match=r"1.5 of query 'q2', document 1 \(rank 2\)"):
        score_labels({"q1": [1, 0], "q2": [0, 1.5]}, ["P@1"])


@pytest.mark.parametrize("name", ["P@0", "Recall@5", "NDCG10", "MAP@", "", "P@-1"])
def test_bad_metric_name_raises(name):
    with pytest.raises(ValueError, match="unknown retrieval metric"):
        parse_metric(name)


def test_metric_names_parse():
    assert parse_metric("NDCG@10") == ("NDCG", 10)
    assert parse_metric("MAP") == ("MAP", None)
    assert parse_metric("hit@5") == ("Hit", 5)


def test_empty_ranked_list_scores_zero():
    assert score_labels({"q": []}, ["P@5", "MRR", "NDCG@5"])["per_query"]["q"] == {"P@5": 0, "MRR": 0, "NDCG@5": 0}
