"""Relevance pretraining of the demo's RE: its groups put the passage stating the asked fact first,
then namesakes with the same relation, the entity's other facts and random passages, deterministic by
seed; respelled names keep namesakes; a short run writes a folder the demo config can start from."""

import dataclasses
import json
import random

import pytest
import torch

from erag.lm import load_tokenizer
from rerag.demo import estimator_pretraining as re_pretraining
from rerag.demo.reader_pretraining import CorpusConfig, ReadingCorpus


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
    assert re_pretraining.states_the_fact(*again).tolist() == [1.0] + [0.0] * 7


@pytest.mark.slow  # the corpus takes seconds to build
def test_answerless_groups_swap_the_answer_for_a_namesake_and_keep_their_size():
    corpus = ReadingCorpus(CorpusConfig())
    plain = re_pretraining.GroupSampler(corpus, 2, 2, 3)
    assert re_pretraining.GroupSampler(corpus, 2, 2, 3, answerless=0.0)(random.Random(3)) == plain(random.Random(3))
    sampler = re_pretraining.GroupSampler(corpus, 2, 2, 3, answerless=1.0)
    for seed in range(20):
        question, passages = sampler(random.Random(seed))
        assert len(passages) == 8 and re_pretraining.states_the_fact(question, passages).sum() == 0
        asked = [p for p in passages[:3] if p["title"].split()[0].lower() in question.lower()]
        assert len(asked) == 3 and all(p["title"].lower() not in question.lower() for p in passages[:3])  # namesakes
    labels = [
        re_pretraining.states_the_fact(*re_pretraining.GroupSampler(corpus, 2, 2, 3, answerless=0.5)(random.Random(s)))[
            0
        ]
        for s in range(200)
    ]
    assert 70 < sum(labels) < 130  # about half keep the answer's passage


def test_respelled_entities_keep_their_kinds_and_namesakes():
    tokenizer = load_tokenizer("rerag:assets/demo_tokenizer")
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


@pytest.mark.slow  # the corpus takes seconds to build
def test_a_short_run_writes_a_folder_the_demo_config_loads(tmp_path):
    from rerag.models.estimator import RelevanceEstimator
    from rerag.models.loading import ModelSpec, build_model

    cfg = re_pretraining.EstimatorPretrainConfig(
        out_dir=str(tmp_path / "re"),
        steps=2,
        batch_size=2,
        eval_every=1,
        n_eval=4,
        alpha_anchor=1.0,
        answerless=0.5,
        model={**re_pretraining.EstimatorPretrainConfig().model, "d_model": 16, "d_ff": 32, "d_kv": 4},
    )
    estimator, rows = re_pretraining.pretrain_estimator(cfg, log=lambda _: None)
    assert [r.get("step") for r in rows[:3]] == [0, 1, 2] and "accuracy_vs_namesakes" in rows[-1]
    assert all(0.0 <= r["heldout_auroc"] <= 1.0 for r in rows[:3])
    out = re_pretraining.save_estimator(estimator, cfg, rows)
    saved = json.loads((out / "pretraining.json").read_text())
    assert saved["command"] == "rerag pretrain-estimator" and saved["pretrain"]["steps"] == 2
    tokenizer = load_tokenizer(cfg.tokenizer)
    loaded = RelevanceEstimator(
        build_model(ModelSpec(name_or_path=str(out)), tokenizer),
        tokenizer,
        "true",
        "false",
        cfg.template,
        cfg.max_length,
    )
    question, passages = re_pretraining.GroupSampler(ReadingCorpus(CorpusConfig()), 1, 1, 1)(random.Random(0))
    assert loaded.score(question, passages).tolist() == pytest.approx(
        estimator.score(question, passages).tolist(), abs=1e-5
    )
    # a run started from that folder keeps its record: the chain of runs behind the weights
    again = dataclasses.replace(cfg, init=str(out), out_dir=str(tmp_path / "re2"), steps=1)
    out2 = re_pretraining.save_estimator(re_pretraining.pretrain_estimator(again, log=lambda _: None)[0], again, rows)
    chained = json.loads((out2 / "pretraining.json").read_text())
    assert chained["pretrain"]["init"] == str(out) and chained["init_pretraining"] == saved


def test_answer_auroc_separates_groups_by_their_best_score():
    class Scorer(torch.nn.Module):  # s = 2 on the passage written for the question, else its index / 10
        def score(self, question, passages):
            return torch.tensor([2.0 if p["question"] == question else i / 10 for i, p in enumerate(passages)])

    with_answer = [("q1", [{"question": "q1"}, {"question": "x"}]), ("q2", [{"question": "y"}, {"question": "q2"}])]
    without = [("q3", [{"question": "a"}, {"question": "b"}, {"question": "c"}])]
    assert re_pretraining.answer_auroc(Scorer(), with_answer + without) == 1.0
    namesake = [("q3", [{"question": "a"}, {"question": "b"}, {"question": "qx"}])]
    fooled = Scorer()
    fooled.score = lambda q, ps: (
        Scorer().score(q, ps) + torch.tensor([3.0 if p["question"] == "qx" else 0.0 for p in ps])
    )
    assert re_pretraining.answer_auroc(fooled, with_answer + namesake) == 0.0  # a passage without the answer on top


def test_answerless_must_be_a_share():
    with pytest.raises(ValueError, match="estimator.answerless .* in \\[0, 1\\]: got 1.5"):
        re_pretraining.EstimatorPretrainConfig(answerless=1.5)
