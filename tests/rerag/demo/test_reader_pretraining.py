import re

import pytest
import torch

from erag.answers import has_answer
from rerag.demo import world as synthetic
from rerag.demo.reader_pretraining import (
    SYLLABLES,
    CorpusConfig,
    PretrainConfig,
    ReadingCorpus,
    build_reader,
    encode,
    pretrain,
    save_reader,
)

SMALL = CorpusConfig(seed=3, n_entities=200, n_places=30)


def _templates_skeleton(text: str) -> str:
    return re.sub(r"\{[a-z]+\}", "{}", text).lower()


def test_corpus_is_deterministic_and_answerable():
    corpus = ReadingCorpus(SMALL)
    a, b = corpus.examples(50, seed=1), ReadingCorpus(SMALL).examples(50, seed=1)
    assert a == b and a != corpus.examples(50, seed=2)
    assert all(has_answer(e["text"], e["answers"]) for e in a)
    assert len({e["question"].split(" ")[0] for e in a}) >= 3


def test_corpus_shares_no_templates_syllables_or_names_with_the_demo_world():
    assert not set(SYLLABLES) & set(synthetic._SYLLABLES)
    demo_templates = {_templates_skeleton(t) for qs, fs, ds in synthetic._RELATIONS.values() for t in qs + fs + ds}
    demo_templates |= {_templates_skeleton(t) for t in synthetic._FILLER}
    from rerag.demo import reader_pretraining as rp

    ours = {_templates_skeleton(t) for t in rp._ATTR_FACTS + rp._ATTR_QUESTIONS + rp._FILLER}
    ours |= {_templates_skeleton(t) for _, qs, fs in rp._VERBS.values() for t in qs + fs}
    assert not ours & demo_templates
    # No demo answer word (profession) and no demo name appears in the pretraining text.
    world, questions = synthetic.build_world(synthetic.WorldConfig(seed=0, n_train_people=50))
    demo_names = {d["title"] for d in world} | {q["answers"][0] for qs in questions.values() for q in qs}
    words = set()
    for e in ReadingCorpus(SMALL).examples(300, seed=0):
        words |= set(re.findall(r"[A-Za-z]+", f"{e['question']} {e['text']} {' '.join(e['answers'])}"))
    assert not words & set(synthetic._PROFESSIONS)
    assert not {n for n in demo_names if " " not in n and not n.isdigit()} & words
    assert not any(n in words for n in {p.split(" ")[-1] for p in demo_names if " " in p})


def test_a_few_pretraining_steps_reduce_the_loss(tokenizer_dir, tmp_path):
    cfg = PretrainConfig(
        out_dir=str(tmp_path / "reader"),
        tokenizer=tokenizer_dir,
        d_model=32,
        d_ff=64,
        d_kv=8,
        num_heads=4,
        num_layers=1,
        num_decoder_layers=1,
        steps=30,
        batch_size=8,
        lr=3e-3,
        warmup_steps=5,
        max_length=64,
        eval_every=1000,
        n_eval=8,
    )
    torch.manual_seed(0)
    from erag.lm import load_tokenizer
    from rerag.models.generator import Generator

    tokenizer = load_tokenizer(tokenizer_dir)
    corpus = ReadingCorpus(SMALL)
    fixed = corpus.examples(16, seed=7)

    def loss_of(generator) -> float:
        with torch.no_grad():
            return generator.model(**encode(generator, fixed, cfg.template, cfg.max_length)).loss.item()

    torch.manual_seed(cfg.seed)
    before = loss_of(Generator(build_reader(cfg, tokenizer), tokenizer, cfg.max_answer_length).eval())
    generator, rows = pretrain(cfg, SMALL, log=lambda _: None)
    assert loss_of(generator) < before - 0.5
    out = save_reader(generator, cfg, SMALL, rows)
    assert (out / "model.safetensors").exists() and (out / "pretraining.json").exists()


def test_pretraining_is_deterministic(tokenizer_dir, tmp_path):
    """What makes the shipped reader reproducible: same settings, same weights."""
    cfg = dict(
        tokenizer=tokenizer_dir,
        d_model=32,
        d_ff=64,
        d_kv=8,
        num_heads=4,
        num_layers=1,
        num_decoder_layers=1,
        steps=6,
        batch_size=4,
        warmup_steps=2,
        max_length=64,
        eval_every=1000,
        n_eval=4,
    )
    a, _ = pretrain(PretrainConfig(out_dir=str(tmp_path / "a"), **cfg), SMALL, log=lambda _: None)
    b, _ = pretrain(PretrainConfig(out_dir=str(tmp_path / "b"), **cfg), SMALL, log=lambda _: None)
    for (name, p), q in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(p, q), name


def test_shipped_reader_scores_the_answer_highest_where_a_passage_holds_it():
    """The signal RE-RAG needs from its generator (F_ij of eq. 8 peaked on answer-bearing
    contexts), on demo-world questions: the reader was pretrained on the reading corpus alone."""
    from rerag.inputs import format_pairs
    from rerag.models.generator import Generator

    reader = Generator.from_pretrained("rerag:assets/reader")
    corpus, questions = synthetic.build_world(
        synthetic.WorldConfig(seed=7, n_train_people=10, n_dev_people=0, n_test_people=0)
    )
    hits = total = 0
    for q in questions["train"]:
        passages = [d for d in corpus if d["title"] in q["question"]]
        holds = [has_answer(d["text"], q["answers"]) for d in passages]
        if not any(holds):
            continue
        enc = reader.tokenizer(
            format_pairs(reader.template, [q["question"]] * len(passages), passages), padding=True, return_tensors="pt"
        )
        with torch.no_grad():
            f = reader.answer_loglik(
                enc.input_ids, enc.attention_mask, reader.encode_answers([q["answers"][0]] * len(passages))
            )
        hits += holds[int(f.argmax())]
        total += 1
    assert total >= 20 and hits / total >= 0.9


def test_rerag_pretrain_takes_every_setting_as_a_flag_with_the_configs_defaults(monkeypatch, capsys, tmp_path):
    """`rerag pretrain`: one flag per PretrainConfig and CorpusConfig field (`--reader.*`, `--corpus.*`),
    parsed from the command's signature; what the flags leave out keeps the dataclasses' defaults."""
    from rerag.cli import main
    from rerag.demo import reader_pretraining

    ran = []
    monkeypatch.setattr(reader_pretraining, "pretrain", lambda cfg, corpus: ran.append((cfg, corpus)) or ("g", []))
    monkeypatch.setattr(reader_pretraining, "save_reader", lambda generator, cfg, corpus, rows: cfg.out_dir)
    main(
        [
            "pretrain",
            "--reader.out_dir",
            str(tmp_path),
            "--reader.steps",
            "7",
            "--reader.lr",
            "0.01",
            "--corpus.seed",
            "5",
        ]
    )
    assert ran == [(PretrainConfig(out_dir=str(tmp_path), steps=7, lr=0.01), CorpusConfig(seed=5))]
    assert capsys.readouterr().out.strip() == str(tmp_path)

    with pytest.raises(SystemExit) as done:
        main(["pretrain", "--help"])
    assert done.value.code == 0
    usage = capsys.readouterr().out
    fields = [f"reader.{n}" for n in PretrainConfig.__dataclass_fields__]
    for name in [*fields, *(f"corpus.{n}" for n in CorpusConfig.__dataclass_fields__)]:
        assert f"--{name} " in usage, name
