"""benchmarks/cloze_questions.py: a cloze question drops its answer for a wh-word, and names the passage
it was cut from as gold."""

import importlib.util
import sys
from pathlib import Path

from eor.corpus import Passage

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cloze_questions.py"
spec = importlib.util.spec_from_file_location("cloze_questions", SCRIPT)
cloze_questions = importlib.util.module_from_spec(spec)
sys.modules["cloze_questions"] = cloze_questions
spec.loader.exec_module(cloze_questions)


def test_candidates_pick_numbers_and_inner_capitalized_phrases():
    sentence = "The duchy paid 1,200 marks to William of Normandy in 1066 and to Rollo's heirs."
    found = {sentence[s:e]: wh for s, e, wh in cloze_questions.candidates(sentence)}
    # "The" opens the sentence; "Rollo's" is a possessive
    assert found == {"1,200": "How many", "1066": "When", "William of Normandy": "What"}


def test_cloze_removes_the_answer_and_keeps_the_clause():
    sentence = "In 1854 at Ballarat there was an armed rebellion against the government."
    start = sentence.index("1854")
    question = cloze_questions.cloze(sentence, start, start + 4, "When", clause_words=3)
    assert question == "When In at Ballarat there?"


def test_one_question_per_long_enough_sentence_with_its_passage_as_gold():
    passages = [
        Passage(
            "0.0.0", "Land", "Short one. The river flows past Melbourne into the bay every single day of the year."
        ),
        Passage("0.0.1", "Land", "no candidate in this lower case sentence of many words at all"),
    ]
    questions = cloze_questions.cloze_questions(passages, min_words=8, clause_words=10, seed=0)
    assert len(questions) == 1
    q = questions[0]
    assert q["answers"] == ["Melbourne"] and q["gold"] == {"0.0.0"}
    assert q["question"].startswith("What ") and "Melbourne" not in q["question"]
