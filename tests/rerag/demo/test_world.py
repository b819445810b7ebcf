from erag.answers import has_answer
from rerag.demo.world import WorldConfig, build_world

CFG = WorldConfig(seed=5, n_train_people=30, n_dev_people=5, n_test_people=5)


def test_same_seed_same_world_other_seed_other_world():
    assert build_world(CFG) == build_world(CFG)
    assert (
        build_world(CFG)[0] != build_world(WorldConfig(seed=6, n_train_people=30, n_dev_people=5, n_test_people=5))[0]
    )


def test_world_has_hard_distractors_and_unanswerable_questions():
    corpus, questions = build_world(CFG)
    qs = [q for split in questions.values() for q in split]
    assert len({q["question"].split(" ")[0] for q in qs}) >= 3  # several templates
    unanswerable = [q for q in qs if not q["answerable_in_corpus"]]
    assert 0 < len(unanswerable) < len(qs)
    # No passage of the corpus states an unanswerable question's answer next to the person.
    for q in unanswerable[:20]:
        person = next(d["title"] for d in corpus if d["title"] in q["question"])
        own = [d for d in corpus if d["title"] == person]
        assert own and not any(has_answer(d["text"], q["answers"][:1]) for d in own if q["relation"] != "year")
    # Hard distractors: passages about the question's person that lack the answer.
    q = next(q for q in qs if q["answerable_in_corpus"] and q["relation"] == "guild")
    person = next(d["title"] for d in corpus if d["title"] in q["question"])
    about = [d for d in corpus if d["title"] == person]
    assert sum(has_answer(d["text"], q["answers"]) for d in about) >= 1
    assert sum(not has_answer(d["text"], q["answers"]) and "guild" in d["text"].lower() for d in about) >= 1


def test_the_datamodule_rewrites_a_world_written_by_another_config(tmp_path):
    from rerag.demo.datamodule import DemoDataModule

    small = dict(
        n_train_people=4, n_dev_people=2, n_test_people=2, n_cities=6, n_guilds=4, n_train_contexts=4, n_eval_contexts=6
    )
    DemoDataModule(world=small, data_dir=str(tmp_path)).prepare_data()
    written = (tmp_path / "dev.jsonl").stat().st_mtime_ns
    DemoDataModule(world=small, data_dir=str(tmp_path)).prepare_data()  # the same world: kept
    assert (tmp_path / "dev.jsonl").stat().st_mtime_ns == written
    DemoDataModule(world={**small, "n_dev_people": 3}, data_dir=str(tmp_path)).prepare_data()
    assert len((tmp_path / "dev.jsonl").read_text().splitlines()) == 3 * 4  # 4 questions per person
