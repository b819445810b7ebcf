"""Baseline labelings: containing the answer, LLM judge."""

from erag.baselines import contains_answer_labels, llm_judge_labels, parse_yes_no


def test_contains_answer_labels():
    retrieval = {"a": {"question": "?", "documents": ["x Paris y", "nothing"]}}
    assert contains_answer_labels(retrieval, {"a": ["paris"]}) == {"a": [1.0, 0.0]}


def test_yes_no_parsing():
    assert [parse_yes_no(t) for t in ["Yes.", " yes, it is", "no", "yesterday", "maybe"]] == [1, 1, 0, 0, 0]


def test_llm_judge_asks_one_document_at_a_time():
    seen = []

    def judge(questions, contexts):
        seen.extend(zip(questions, contexts))
        return ["Yes" if "moon" in docs[0] else "No" for docs in contexts]

    retrieval = {"a": {"question": "What orbits Earth?", "documents": ["the moon", "a car"]}}
    assert llm_judge_labels(retrieval, judge) == {"a": [1.0, 0.0]}
    assert all(len(docs) == 1 and "What orbits Earth?" in q and "yes or no" in q for q, docs in seen)
