"""benchmarks/re_pretraining.py: its groups put the passage stating the asked fact first, then
namesakes with the same relation, the entity's other facts and random passages; deterministic by seed."""
import importlib.util
import random
from pathlib import Path

import pytest

from rerag.demo.reader_pretraining import CorpusConfig, ReadingCorpus

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "re_pretraining.py"
spec = importlib.util.spec_from_file_location("re_pretraining", SCRIPT)
re_pretraining = importlib.util.module_from_spec(spec)
spec.loader.exec_module(re_pretraining)


@pytest.mark.slow  # the corpus of 3,000 entities takes seconds to build
def test_groups_hold_the_answer_first_and_hard_negatives_after():
    corpus = ReadingCorpus(CorpusConfig())
    sampler = re_pretraining.GroupSampler(corpus, n_entity=2, n_relation=2, n_random=3)
    for seed in range(30):
        question, passages = sampler(random.Random(seed))
        assert len(passages) == 8
        positive, namesakes, same_entity = passages[0], passages[1:3], passages[3:5]
        assert positive["question"] == question and positive["answers"][0].lower() in positive["text"].lower()
        entity = positive["title"]
        assert entity.lower() in question.lower()
        for p in namesakes:  # another entity whose name starts with the same word
            assert p["title"] != entity and p["title"].split()[0] == entity.split()[0]
        for p in same_entity:  # the asked entity, another relation
            assert p["title"] == entity and p["question"] != question
    again = sampler(random.Random(7))
    assert again == sampler(random.Random(7))
