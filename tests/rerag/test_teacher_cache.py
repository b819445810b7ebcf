"""The frozen teacher's cache: built once, reused, rebuilt on any change; the same loss as live scoring."""

import glob
import json
import os
import random

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

import rerag.teacher_cache
from erag.lm import encode_answers, encode_prompts
from rerag.assembly import AssemblySpec
from rerag.data.datamodule import RERAGDataModule, word_window
from rerag.inputs import fill
from rerag.models.loading import ModelSpec
from rerag.models.lora import LoraSpec
from rerag.module import RERAGModule
from rerag.optimization import OptimizerSpec
from rerag.stages import RE_ALONE, Stage
from rerag.teacher_cache import MAX_QUESTION_TOKENS, TeacherScores, TeacherSpec, build_teacher_scores, pair_key
from tests.rerag.conftest import TINY_LLAMA, train
from tests.rerag.helpers import changed


def teacher_then_joint(steps):
    """A frozen-teacher stage of `steps` optimizer steps, then joint training."""
    return [Stage(steps=steps, train="estimator", re_learns_from="teacher"), Stage()]


def fit(module_kwargs, data_kwargs, cache_dir, tmp_path, seed=0, steps=1, **teacher):
    """The RE alone against the frozen teacher (`TeacherSpec` fields `teacher` beside its cache folder)."""
    L.seed_everything(seed)
    module = RERAGModule(**module_kwargs, stages=RE_ALONE, teacher=TeacherSpec(cache_dir=str(cache_dir), **teacher))
    return train(module, data_kwargs, tmp_path, steps)


def cache_files(cache_dir):
    return sorted(glob.glob(str(cache_dir / "*.pt")))


def test_the_cache_is_reused_and_rebuilt_when_teacher_data_or_prompt_change(
    causal_module_kwargs, causal_data_kwargs, tmp_path, world_dir
):
    cache = tmp_path / "cache"
    first = fit(causal_module_kwargs, causal_data_kwargs, cache, tmp_path)
    assert len(cache_files(cache)) == 1 and len(first.teacher_scores) > 0
    (stamp,) = cache_files(cache)
    mtime = os.path.getmtime(stamp)
    fit(causal_module_kwargs, causal_data_kwargs, cache, tmp_path)  # same teacher, data, prompt: read back
    assert cache_files(cache) == [stamp] and os.path.getmtime(stamp) == mtime

    # another prompt
    fit(causal_module_kwargs, causal_data_kwargs, cache, tmp_path, template="Q: {question} C: {text}")
    assert len(cache_files(cache)) == 2
    # another teacher: the generator's weights differ with the seed
    fit(causal_module_kwargs, causal_data_kwargs, cache, tmp_path, seed=1)
    assert len(cache_files(cache)) == 3
    # another training file: one record fewer
    lines = (world_dir / "train.jsonl").read_text().splitlines()[:-1]
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n")
    fit(causal_module_kwargs, {**causal_data_kwargs, "train_file": str(tmp_path / "train.jsonl")}, cache, tmp_path)
    assert len(cache_files(cache)) == 4


def test_training_from_the_cache_gives_the_live_loss(causal_module_kwargs, causal_data_kwargs, tmp_path):
    module = fit(causal_module_kwargs, causal_data_kwargs, tmp_path / "cache", tmp_path, steps=1)
    module.eval()  # no dropout: both passes see the same RE
    data = RERAGDataModule(**causal_data_kwargs)
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    b, k = len(batch["ids"]), int(batch["n_contexts"][0])
    with torch.no_grad():
        labels = batch["labels"].repeat_interleave(k, dim=0)
        live_f = module.generator.answer_loglik(batch["gen"]["input_ids"], batch["gen"]["attention_mask"], labels)
        cached_f = module.teacher_scores.lookup(batch["questions"], batch["targets"], batch["contexts"])
        live, cached = (module.relevance_losses(batch, f.view(b, k))["loss"] for f in (live_f, cached_f))
    assert torch.allclose(cached_f.view(-1), live_f, atol=1e-5)
    assert torch.allclose(live, cached, atol=1e-5)


def test_the_cache_holds_what_the_fits_epochs_draw(causal_module_kwargs, causal_data_kwargs, tmp_path):
    """A fit one step longer than an epoch starts 2 epochs (the second ends early); its cache holds
    the triples those epochs draw, fewer than every one they may draw from."""
    data_kwargs = {**causal_data_kwargs, "n_train_contexts": 2, "n_deep_contexts": 1, "batch_size": 8}
    data = RERAGDataModule(**data_kwargs)
    data.setup("fit")
    per_epoch = len(data.train_dataloader())
    module = fit(causal_module_kwargs, data_kwargs, tmp_path / "cache", tmp_path, steps=per_epoch + 1)
    assert module.training_epochs() == 2
    drawn = {pair_key(q, a, c) for q, a, c in data.teacher_triples(2)}
    assert module.teacher_scores.scores.keys() == drawn
    assert drawn < {pair_key(q, a, c) for q, a, c in data.teacher_triples()}


def test_a_teacher_other_than_the_generator(causal_module_kwargs, causal_data_kwargs, chat_tokenizer_dir, tmp_path):
    other = ModelSpec(config={**TINY_LLAMA, "num_hidden_layers": 2})
    teacher = {"model": other, "tokenizer": chat_tokenizer_dir}
    module = fit(causal_module_kwargs, causal_data_kwargs, tmp_path / "cache", tmp_path, steps=2, **teacher)
    default = fit(causal_module_kwargs, causal_data_kwargs, tmp_path / "cache", tmp_path)
    assert len(cache_files(tmp_path / "cache")) == 2
    assert module.teacher_scores.scores.keys() == default.teacher_scores.scores.keys()
    assert module.teacher_scores.scores != default.teacher_scores.scores  # another model's likelihoods


def test_a_teacher_cache_needs_a_stage_that_learns_from_the_teacher(causal_module_kwargs, tmp_path):
    with pytest.raises(ValueError, match=r"model\.teacher: no stage learns from the teacher"):
        RERAGModule(**causal_module_kwargs, teacher=TeacherSpec(cache_dir=str(tmp_path)))
    with pytest.raises(TypeError, match="cache_dir"):  # a teacher is only read through its cache
        TeacherSpec(model=ModelSpec(config=TINY_LLAMA))


QUESTION_TEMPLATE = "Passage: {text}\nWrite a question about it."


def test_a_question_template_adds_the_questions_likelihood(causal_module_kwargs, causal_data_kwargs, tmp_path):
    module = fit(
        causal_module_kwargs, causal_data_kwargs, tmp_path / "cache", tmp_path, question_template=QUESTION_TEMPLATE
    )
    default = fit(causal_module_kwargs, causal_data_kwargs, tmp_path / "cache", tmp_path)
    assert len(cache_files(tmp_path / "cache")) == 2  # its own cache
    question, answer, context = next(iter(module.trainer.datamodule.teacher_triples(module.training_epochs())))
    lm = module.generator
    prompt = encode_prompts(lm.tokenizer, [fill(QUESTION_TEMPLATE, "", context)], lm.max_length)
    with torch.no_grad():
        question_ll = lm.answer_loglik(**prompt, labels=encode_answers(lm.tokenizer, [question], MAX_QUESTION_TOKENS))
    key = pair_key(question, answer, context)
    assert question_ll.item() < -1
    assert module.teacher_scores.scores[key] == pytest.approx(
        default.teacher_scores.scores[key] + question_ll.item(), abs=1e-4
    )


def test_a_question_template_is_checked(causal_module_kwargs, tmp_path):
    with pytest.raises(ValueError, match=r"model\.teacher\.question_template: .* holds \{question\}"):
        RERAGModule(
            **causal_module_kwargs,
            stages=RE_ALONE,
            teacher=TeacherSpec(cache_dir=str(tmp_path), question_template="{question} {text}"),
        )
    with pytest.raises(TypeError, match="cache_dir"):  # scored once into the teacher cache: it needs one
        TeacherSpec(question_template=QUESTION_TEMPLATE)


def test_after_a_first_stage_the_questions_cached_likelihood_stays_in_f(
    causal_module_kwargs, causal_data_kwargs, tmp_path
):
    """A frozen-teacher stage, then a joint one, with a question template: the first stage reads F = log P(a | q, c) + log P(q | c)
    from the cache; the joint stage adds the cached log P(q | c) to the live generator's log P(a | q, c)."""
    L.seed_everything(0)
    kwargs = causal_module_kwargs | {
        "stages": teacher_then_joint(1),
        "teacher": TeacherSpec(cache_dir=str(tmp_path / "cache"), question_template=QUESTION_TEMPLATE),
    }
    module, seen = RERAGModule(**kwargs), []
    losses = module.relevance_losses

    def record(batch, answer_loglik):
        b, k = answer_loglik.shape
        cache = module.teacher_scores
        with torch.no_grad():
            labels = batch["labels"].repeat_interleave(k, dim=0)
            live = module.generator.answer_loglik(batch["gen"]["input_ids"], batch["gen"]["attention_mask"], labels)
            question = cache.question_lookup(batch["questions"], batch["contexts"])
        cached = cache.lookup(batch["questions"], batch["targets"], batch["contexts"])
        seen.append((module.global_step, answer_loglik.detach(), cached, live.view(b, k) + question, question))
        return losses(batch, answer_loglik)

    module.relevance_losses = record
    train(module, causal_data_kwargs, tmp_path, steps=3)
    assert [step for step, *_ in seen] == [0, 1, 2]
    for step, f, cached, live_with_question, question in seen:
        assert (question < -1).all()
        assert torch.allclose(f, cached if step == 0 else live_with_question, atol=1e-4)
    # the generator trained after the first stage, so its F moved off the cached one
    assert not torch.allclose(seen[2][1], seen[2][2], atol=1e-4)


def test_a_missing_pair_names_the_question_and_contexts():
    scores = TeacherScores({pair_key("q", "a", {"text": "t"}): -1.0}, key="k")
    assert scores.lookup(["q"], ["a"], [[{"text": "t"}]]).tolist() == [[-1.0]]
    with pytest.raises(KeyError, match="'q'.*'b'.*c9"):
        scores.lookup(["q"], ["b"], [[{"id": "c9", "text": "t"}]])


def test_windows_cut_every_training_context_to_one_length(causal_data_kwargs):
    data = RERAGDataModule(**causal_data_kwargs, train_context_words=5)
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    assert all(len(c["text"].split()) <= 5 for cs in batch["contexts"] for c in cs)
    again = next(iter(data.train_dataloader()))  # the same window every time: the cache stays valid
    assert [c["text"] for c in batch["contexts"][0]] == [c["text"] for c in again["contexts"][0]]
    triples = list(data.teacher_triples())
    assert {pair_key(q, a, c) for q, a, c in triples} >= {
        pair_key(q, t, c) for q, t, cs in zip(batch["questions"], batch["targets"], batch["contexts"]) for c in cs
    }
    rng = random.Random(0)
    assert word_window({"text": "a b c"}, 5, rng) == {"text": "a b c"}
    assert len(word_window({"text": "a b c d e f g"}, 3, rng)["text"].split()) == 3


def test_the_generator_can_read_whole_passages_while_the_re_reads_windows(causal_data_kwargs):
    windowed = RERAGDataModule(**causal_data_kwargs, train_context_words=5)
    whole = RERAGDataModule(**causal_data_kwargs, train_context_words=5, window_generator_contexts=False)
    for data in (windowed, whole):
        data.setup("fit")
    a, b = next(iter(windowed.train_dataloader())), next(iter(whole.train_dataloader()))
    assert torch.equal(a["re"]["input_ids"], b["re"]["input_ids"])  # the RE reads the same windows
    assert any(len(c["text"].split()) > 5 for cs in b["contexts"] for c in cs)  # whole passages
    assert not torch.equal(a["gen"]["input_ids"], b["gen"]["input_ids"])
    texts = [c["text"] for cs in b["contexts"] for c in cs]
    for prompt, text in zip(whole.gen_tok.batch_decode(b["gen"]["input_ids"]), texts):
        assert " ".join(text.split()[:8]) in prompt  # more than a window's 5 words (long ones are truncated)
    assert {c["text"] for _, _, c in whole.teacher_triples()} >= set(texts)  # the teacher reads them whole


def test_build_sorts_nothing_away(causal_module_kwargs):
    module = RERAGModule(**causal_module_kwargs, stages=RE_ALONE)
    triples = [
        ("q1", "a", {"title": "", "text": "x y"}),
        ("q1", "a", {"title": "", "text": "x y"}),
        ("q2", "b", {"title": "t", "text": "z " * 20}),
    ]
    scores = build_teacher_scores(module.generator, triples, batch_size=1)
    assert len(scores) == 2 and all(v < 0 for v in scores.scores.values())
    json.dumps(scores.scores)


def test_the_cache_is_built_in_batches_of_score_batch_size_and_the_batch_does_not_change_f(
    causal_module_kwargs, causal_data_kwargs, tmp_path, monkeypatch
):
    sizes, score_share = [], rerag.teacher_cache.score_share

    def recording(teacher, work, batch_size, *args):
        sizes.append(batch_size)
        return score_share(teacher, work, batch_size, *args)

    monkeypatch.setattr(rerag.teacher_cache, "score_share", recording)
    kwargs = changed(causal_module_kwargs, {"evaluation.score_batch_size": 3})
    module = fit(kwargs, causal_data_kwargs, tmp_path / "cache", tmp_path)
    assert sizes == [3]
    data = RERAGDataModule(**causal_data_kwargs)
    data.setup("fit")
    one_by_one = build_teacher_scores(module.generator, data.teacher_triples(module.training_epochs()), batch_size=1)
    assert one_by_one.scores.keys() == module.teacher_scores.scores.keys()
    for k, f in one_by_one.scores.items():  # padding in a batch of 3 leaves each row's F as it reads alone
        assert f == pytest.approx(module.teacher_scores.scores[k], abs=1e-4)


def test_a_cache_batch_holds_one_contexts_rows_and_sharing_their_prefix_leaves_f(
    causal_module_kwargs, causal_data_kwargs
):
    """With the passage before the question, the teacher reads a batch of one context's rows (their
    prompts alike up to the question), so the passage runs once per batch; F as each row reads
    alone, the question's part included."""
    template = {
        "inputs.generator_template": "Passage: {text}\nQuestion: {question}",
        "inputs.generator_max_length": 384,
    }
    teacher = RERAGModule(**changed(causal_module_kwargs, template), stages=RE_ALONE).generator
    data = RERAGDataModule(**causal_data_kwargs)
    data.setup("fit")
    triples = list(data.teacher_triples())
    batches, score = [], teacher.answer_loglik

    def recording(input_ids, attention_mask, labels):
        prompts = teacher.tokenizer.batch_decode(input_ids, skip_special_tokens=True)
        batches.append({p.split("Question:")[0] for p in prompts})  # the question part's prompts hold none
        return score(input_ids, attention_mask, labels)

    teacher.answer_loglik, teacher.share_prefix = recording, True
    grouped = build_teacher_scores(teacher, triples, batch_size=8, question_template=QUESTION_TEMPLATE)
    assert all(len(heads) == 1 for heads in batches)  # one passage per batch
    assert len(batches) < len(triples) and len(set.union(*batches)) > 1
    teacher.share_prefix = False
    alone = build_teacher_scores(teacher, triples, batch_size=1, question_template=QUESTION_TEMPLATE)
    assert alone.scores.keys() == grouped.scores.keys()
    for k, f in alone.scores.items():
        assert f == pytest.approx(grouped.scores[k], abs=1e-4)
    for k, f in alone.question_scores.items():
        assert f == pytest.approx(grouped.question_scores[k], abs=1e-4)


def test_a_first_teacher_stage_switches_to_joint_training_at_its_step(
    causal_module_kwargs, causal_data_kwargs, tmp_path
):
    """A frozen-teacher stage of 2 steps: the generator stays as it starts (F from the cache) for two
    optimizer steps, then trains jointly; the stage is logged by step."""

    class Record(L.Callback):
        def __init__(self):
            self.rows = []

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            weights = torch.cat([p.detach().flatten() for p in module.generator.model.parameters()])
            stage = float(trainer.callback_metrics["train/stage"])
            self.rows.append((trainer.global_step, stage, weights.clone()))

    L.seed_everything(0)
    teacher = TeacherSpec(cache_dir=str(tmp_path / "cache"))
    kwargs = {**causal_module_kwargs, "stages": teacher_then_joint(2), "teacher": teacher}
    module, record = RERAGModule(**kwargs), Record()
    start = torch.cat([p.detach().flatten().clone() for p in module.generator.model.parameters()])
    train(module, causal_data_kwargs, tmp_path, steps=4, callbacks=[record])
    assert len(module.teacher_scores) > 0 and len(cache_files(tmp_path / "cache")) == 1
    assert [(step, stage) for step, stage, _ in record.rows] == [(1, 0.0), (2, 0.0), (3, 1.0), (4, 1.0)]
    moved = [not torch.equal(weights, start) for _, _, weights in record.rows]
    assert moved == [False, False, True, True]  # the generator trains from the third step on


def test_a_run_resumed_after_its_teacher_stage_reads_the_cache_it_started_with(
    causal_module_kwargs, causal_data_kwargs, tmp_path
):
    """A joint run whose generator trains every weight, resumed from a checkpoint past its first
    stage: the teacher cache's key is the run's (saved in the checkpoint), not one of the trained
    generator, so nothing is rebuilt; with that cache gone, the error names it."""
    teacher = TeacherSpec(cache_dir=str(tmp_path / "cache"))
    kwargs = {**causal_module_kwargs, "stages": teacher_then_joint(1), "teacher": teacher}

    def run(steps, ckpt_path=None):
        L.seed_everything(0)
        checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, every_n_train_steps=1)
        return train(RERAGModule(**kwargs), causal_data_kwargs, tmp_path, steps, [checkpoints], ckpt_path=ckpt_path)

    first = run(2)
    built = cache_files(tmp_path / "cache")
    assert len(built) == 1
    resumed = run(3, ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))
    assert cache_files(tmp_path / "cache") == built
    assert resumed.teacher_scores.scores == first.teacher_scores.scores
    os.remove(built[0])
    with pytest.raises(FileNotFoundError, match=os.path.basename(built[0])):
        run(4, ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))


def test_a_bfloat16_base_trains_its_float32_adapter_under_bf16_mixed(
    causal_module_kwargs, causal_data_kwargs, tmp_path
):
    """The frozen-teacher config's CPU precision: the shared base's weights in bfloat16, the step under
    the trainer's bf16-mixed autocast. The RE's adapter stays float32 and moves; the base stays put."""
    L.seed_everything(0)
    kwargs = causal_module_kwargs | {
        "estimator": ModelSpec(config=TINY_LLAMA, dtype="bfloat16"),
        "generator": None,
        "assembly": AssemblySpec(estimator_lora=LoraSpec(r=2, dropout=0.0), shared_base=True),
        "stages": RE_ALONE,
        "teacher": TeacherSpec(cache_dir=str(tmp_path / "cache")),
    }
    module = RERAGModule(**kwargs)
    named = dict(module.estimator.model.named_parameters())
    adapters = {n: p.detach().clone() for n, p in named.items() if p.requires_grad}
    base = {n: p.detach().clone() for n, p in named.items() if not p.requires_grad}
    assert adapters and {p.dtype for p in adapters.values()} == {torch.float32}
    assert {p.dtype for p in base.values()} == {torch.bfloat16}
    train(module, causal_data_kwargs, tmp_path, steps=2, precision="bf16-mixed")
    after = dict(module.estimator.model.named_parameters())
    assert all(after[n].dtype == torch.float32 for n in adapters)
    assert any(not torch.equal(after[n], p) for n, p in adapters.items())
    assert all(torch.equal(after[n], p) for n, p in base.items())
    assert len(module.teacher_scores) > 0


def test_a_first_generator_stage_trains_the_generator_then_the_re_against_the_base(
    causal_module_kwargs, causal_data_kwargs, tmp_path
):
    """A generator stage of 2 steps on a shared base: the generator's adapter trains alone for two optimizer
    steps (marginalized with the retriever's scores), then stays put while the RE's trains against
    the base's cached F: the same cache file as a run whose generator never trains, each adapter's
    rate scheduled over its own stage."""

    def adapter_weights(module, adapter):
        return torch.cat(
            [p.detach().flatten().clone() for n, p in module.estimator.model.named_parameters() if f".{adapter}." in n]
        )

    class Record(L.Callback):
        def __init__(self):
            self.rows, self.rates = [], []

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.rates.append({g["name"]: g["lr"] for g in trainer.optimizers[0].param_groups})

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            stage = float(trainer.callback_metrics["train/stage"])
            self.rows.append((stage, adapter_weights(module, "generator"), adapter_weights(module, "re")))

    shared = causal_module_kwargs | {
        "generator": None,
        "teacher": TeacherSpec(cache_dir=str(tmp_path / "cache")),
        "optimizer": OptimizerSpec(lr=1e-2, lr_schedule="cosine"),
    }

    def assembly(generator_lora):
        return AssemblySpec(estimator_lora=LoraSpec(r=2, dropout=0.0), generator_lora=generator_lora, shared_base=True)

    L.seed_everything(0)
    stages = [Stage(steps=2, train="generator", marginalize_with="retriever"), *RE_ALONE]
    module, record = RERAGModule(**shared, assembly=assembly(LoraSpec(r=2, dropout=0.0)), stages=stages), Record()
    start = adapter_weights(module, "generator"), adapter_weights(module, "re")
    train(module, causal_data_kwargs, tmp_path, steps=5, callbacks=[record])
    assert [stage for stage, _, _ in record.rows] == [0.0, 0.0, 1.0, 1.0, 1.0]
    generator_moved = [not torch.equal(g, start[0]) for _, g, _ in record.rows]
    re_moved = [not torch.equal(r, start[1]) for _, _, r in record.rows]
    assert generator_moved == [True] * 5 and re_moved == [False, False, True, True, True]
    assert torch.equal(record.rows[1][1], record.rows[4][1])  # the generator stays as its stage left it
    # cosine over each stage: the generator's 2 steps, then the RE's 3
    assert [r["generator"] for r in record.rates] == pytest.approx([1e-2, 5e-3, 0.0, 0.0, 0.0], abs=1e-6)
    assert [r["estimator"] for r in record.rates] == pytest.approx([0.0, 0.0, 1e-2, 7.5e-3, 2.5e-3], abs=1e-6)
    (built,) = cache_files(tmp_path / "cache")
    L.seed_everything(0)
    never_trains = train(
        RERAGModule(**shared, assembly=assembly(None), stages=RE_ALONE), causal_data_kwargs, tmp_path, steps=1
    )
    assert cache_files(tmp_path / "cache") == [built]  # the base's F, read back
    assert never_trains.teacher_scores.scores == module.teacher_scores.scores
    with pytest.raises(ValueError, match=r"model\.assembly\.generator_lora unless no stage trains the generator"):
        RERAGModule(**shared, assembly=assembly(None), stages=stages)
