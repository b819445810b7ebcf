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


def test_respelled_entities_keep_their_kinds_and_namesakes():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(Path(re_pretraining.ROOT) / "rerag" / "assets" / "demo_tokenizer")
    entities = [f"Bek{i:03d}x Hap{i}" for i in range(300)] + [f"the ship Zor{i}" for i in range(50)]
    renamed = re_pretraining.respell_entities(entities, tokenizer, 1.0, random.Random(0))
    assert renamed == re_pretraining.respell_entities(entities, tokenizer, 1.0, random.Random(0))
    assert not set(renamed) & set(entities) and len(renamed) > 0.95 * len(entities)  # a rare clash merges two
    people = [e for e in renamed if not e.startswith("the ship ")]
    assert 280 < len(people) and all(len(e.split(" ")) == 2 for e in people)
    assert len({e.split(" ")[0] for e in people}) <= 100  # first names from a pool: namesakes remain
    # names start with many word-initial pieces (the originals all start with "ĠBek")
    assert len({tokenizer.tokenize(" " + e)[0] for e in people}) > 50
    assert re_pretraining.respell_entities(entities, tokenizer, 0.0, random.Random(0)) == sorted(entities)
