import glob
import json
import re

import lightning as L
import pytest
import torch

from erag.answers import exact_match
from rerag.assembly import AssemblySpec
from rerag.data.datamodule import RERAGDataModule
from rerag.evaluation import Evaluator
from rerag.inputs import passage_windows
from rerag.models.loading import ModelSpec
from rerag.models.lora import LoraSpec
from rerag.module import RERAGModule
from rerag.optimization import OptimizerSpec, parameters_by_model
from rerag.stages import POINTWISE, RE_ALONE, RETRIEVER_MARGINALIZED
from rerag.teacher_cache import TeacherSpec
from tests.rerag.helpers import changed


def make(module_kwargs, data_kwargs, seed=0):
    L.seed_everything(seed)
    return RERAGModule(**module_kwargs), RERAGDataModule(**data_kwargs)


def trainer(tmp_path, **kw):
    defaults = dict(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    return L.Trainer(**{**defaults, **kw})


def test_gradients_reach_both_models(module_kwargs, data_kwargs):
    module, data = make(module_kwargs, data_kwargs)
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    assert batch["re"]["input_ids"].shape[0] == 4 * 4  # B x K rows
    module.training_step(batch, 0).backward()
    for model in (module.estimator.model, module.generator.model):
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert grads and sum(g.abs().sum() for g in grads) > 0


def test_single_context(module_kwargs, data_kwargs):
    module, data = make(module_kwargs, {**data_kwargs, "n_train_contexts": 1})
    data.setup("fit")
    loss = module.training_step(next(iter(data.train_dataloader())), 0)
    assert torch.isfinite(loss)


def test_too_few_contexts_is_a_clear_error(module_kwargs, data_kwargs):
    _, data = make(module_kwargs, {**data_kwargs, "n_train_contexts": 50})
    with pytest.raises(ValueError, match=r"train\.jsonl: record id train-0: field 'ctxs'"):
        data.setup("fit")


def test_validation_reports_every_metric(module_kwargs, data_kwargs, tmp_path):
    module, data = make(module_kwargs, data_kwargs)
    (metrics,) = trainer(tmp_path).validate(module, datamodule=data)
    for key in ("val/em", "val/em_retriever_order", "val/re_recall@1", "val/retriever_recall@5"):
        assert 0.0 <= metrics[key] <= 1.0
    # Recall@k in the retriever's order must match the file's has_answer flags.
    records = [json.loads(line) for line in open(data_kwargs["val_file"])]
    expected = sum(any(c["has_answer"] for c in r["ctxs"][:5]) for r in records) / len(records)
    assert metrics["val/retriever_recall@5"] == pytest.approx(expected)
    # One result per question, keyed by the record's own id, in one pass; EM is computed from them.
    results = module.results["val"]
    assert [r["id"] for r in results] == [r["id"] for r in records]
    assert [r["index"] for r in results] == list(range(len(records)))
    em = sum(exact_match(r["answer"], rec["answers"]) for r, rec in zip(results, records)) / len(records)
    assert metrics["val/em"] == pytest.approx(em)


@pytest.mark.parametrize("depth, windows", [(5, None), (2, None), (2, 8)])  # deeper and shallower than test_top_k 3
def test_shallower_lists_are_scored_as_if_the_data_held_only_them(module_kwargs, data_kwargs, tmp_path, depth, windows):
    # eval_depths [d]: the same model on the same records cut to d contexts gives the top<d> keys; with
    # the RE reading windows, the cut keeps each kept context's windows
    data_kwargs = {**data_kwargs, "eval_context_words": windows}
    module, data = make(changed(module_kwargs, {"evaluation.eval_depths": [depth]}), data_kwargs)
    (both,) = trainer(tmp_path).test(module, datamodule=data)
    module_d, data_d = make(module_kwargs, {**data_kwargs, "n_eval_contexts": depth})
    module_d.load_state_dict(module.state_dict())
    (shallow,) = trainer(tmp_path).test(module_d, datamodule=data_d)
    assert set(shallow) == {k.replace(f"test/top{depth}/", "test/") for k in both if k.startswith(f"test/top{depth}/")}
    for key, value in shallow.items():
        assert both[key.replace("test/", f"test/top{depth}/")] == pytest.approx(value, abs=1e-6), key
    assert len(module.results["test"]) == len(module_d.results["test"])  # results: whole lists only


@pytest.mark.parametrize("depth", [2, 4])  # shallower and deeper than test_top_k 3
def test_a_prompt_read_in_both_orders_and_depths_is_generated_once_in_one_call_per_batch(
    module_kwargs, data_kwargs, tmp_path, monkeypatch, depth
):
    # BM25's top 3 and its first d overlap, and the RE's picks overlap BM25's, so a test batch asks for
    # some prompts more than once; each is generated once, all in one call, with the same answers
    def run(share: bool):
        module, data = make(changed(module_kwargs, {"evaluation.eval_depths": [depth]}), data_kwargs)
        prompts, calls, generate, answer = [], [], module.generator.generate, Evaluator.answer

        def recording(input_ids, attention_mask, *args, **kwargs):
            prompts.extend(tuple(ids[mask.bool()].tolist()) for ids, mask in zip(input_ids, attention_mask))
            calls.append(len(input_ids))
            return generate(input_ids, attention_mask, *args, **kwargs)

        monkeypatch.setattr(module.generator, "generate", recording)
        if not share:  # each read generates on its own, as before answers were shared
            monkeypatch.setattr(Evaluator, "answer", lambda self, *a: answer(self, *a[:3]))
        test = trainer(tmp_path)
        (metrics,) = test.test(module, datamodule=data)
        monkeypatch.undo()
        return metrics, prompts, calls, test.num_test_batches[0]

    (shared, once, calls, batches), (apart, each, *_) = run(share=True), run(share=False)
    assert len(once) == len(set(once)) == len(set(each)) < len(each)
    assert len(calls) == batches
    assert shared == pytest.approx(apart, abs=1e-6)


def test_a_frozen_generators_dev_answers_are_kept_from_one_validation_to_the_next(
    causal_module_kwargs, causal_data_kwargs, tmp_path, monkeypatch
):
    # a generator stage of 2 steps, then validations after steps 1-4: the generator changes up to step 2,
    # so steps 1 and 2 both generate BM25's top 3; from step 2 on it is fixed and no prompt is generated twice
    lora = LoraSpec(r=2, dropout=0.0)
    module = RERAGModule(
        **causal_module_kwargs
        | {"generator": None, "optimizer": OptimizerSpec(lr=1e-2)}
        | {"stages": [{"steps": 2, "train": "generator", "marginalize_with": "retriever"}, *RE_ALONE]},
        assembly=AssemblySpec(estimator_lora=lora, generator_lora=lora, shared_base=True),
        teacher=TeacherSpec(cache_dir=str(tmp_path / "cache")),
    )
    generations, generate = [], module.generator.generate

    class PerValidation(L.Callback):
        def on_validation_epoch_start(self, trainer, pl_module):
            generations.append([])

    def recording(input_ids, attention_mask, *args, **kwargs):
        generations[-1].extend(tuple(ids[mask.bool()].tolist()) for ids, mask in zip(input_ids, attention_mask))
        return generate(input_ids, attention_mask, *args, **kwargs)

    monkeypatch.setattr(module.generator, "generate", recording)
    data = RERAGDataModule(**causal_data_kwargs)
    fit = trainer(tmp_path, max_steps=4, val_check_interval=1, limit_val_batches=1, num_sanity_val_steps=0)
    fit.callbacks.append(PerValidation())
    fit.fit(module, datamodule=data)
    kept = [(r["id"], r["answer"], r["answer_retriever_order"]) for r in module.results["val"]]
    first, second, *later = map(set, generations)
    assert len(generations) == 4 and first & second  # the stage moved the generator: generated afresh
    assert second and all(not (v & w) for i, v in enumerate([second, *later]) for w in [second, *later][:i])
    trainer(tmp_path, limit_val_batches=1).validate(module, datamodule=data)  # a new trainer: all afresh
    assert (
        generations[-1] and [(r["id"], r["answer"], r["answer_retriever_order"]) for r in module.results["val"]] == kept
    )


def test_a_passage_read_in_windows_gets_its_best_window_s(module_kwargs, data_kwargs):
    module, data = make(module_kwargs, {**data_kwargs, "eval_context_words": 8})
    data.setup("validate")
    batch = next(iter(data.val_dataloader()))
    module.eval()
    s = module.relevance_scores(batch)
    flat = [(q, c) for q, cs in zip(batch["questions"], batch["contexts"]) for c in cs]
    assert s.shape == (len(flat),)
    best = [module.estimator.score(q, passage_windows(c, 8)).max() for q, c in flat[:6]]
    whole = [module.estimator.score(q, [c])[0] for q, c in flat[:6]]
    assert all(len(passage_windows(c, 8)) > 1 for _, c in flat[:6])
    assert torch.allclose(s[:6], torch.stack(best), atol=1e-5)
    assert not torch.allclose(s[:6], torch.stack(whole), atol=1e-3)  # not the whole passages' s


def test_window_pooling_sets_how_the_module_pools_a_passages_windows(module_kwargs, data_kwargs):
    module, data = make(
        changed(module_kwargs, {"evaluation.window_pooling": "mean"}), {**data_kwargs, "eval_context_words": 8}
    )
    data.setup("validate")
    batch = next(iter(data.val_dataloader()))
    module.eval()
    s = module.relevance_scores(batch)
    flat = [(q, c) for q, cs in zip(batch["questions"], batch["contexts"]) for c in cs][:6]
    mean = [module.estimator.score(q, passage_windows(c, 8)).mean() for q, c in flat]
    assert torch.allclose(s[:6], torch.stack(mean), atol=1e-5)


def test_fit_logs_losses_to_wandb_offline(module_kwargs, data_kwargs, tmp_path, monkeypatch):
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    monkeypatch.setenv("WANDB_MODE", "offline")
    module, data = make(module_kwargs, data_kwargs)
    logger = WandbLogger(project="rerag-test", save_dir=str(tmp_path), offline=True)
    trainer(tmp_path, logger=logger, max_steps=3, log_every_n_steps=1, limit_val_batches=0).fit(module, datamodule=data)
    # The run's summary holds each logged key's last value, in this process (the offline record file is
    # written by wandb's service process, which may lag behind `finish`).
    summary = dict(logger.experiment.summary)
    wandb.finish()
    for key in ("train/loss", "train/loss_gen", "train/loss_re", "train/loss_tok"):
        assert isinstance(summary.get(key), float) and summary[key] == summary[key]  # logged, and not NaN
    assert summary["train/loss"] == pytest.approx(
        summary["train/loss_gen"]
        + module.loss.alpha_re * summary["train/loss_re"]
        + module.loss.alpha_tok * summary["train/loss_tok"]
        + module.loss.alpha_anchor * summary.get("train/loss_anchor", 0.0),
        rel=1e-5,
    )


def test_resume_matches_an_uninterrupted_run(module_kwargs, data_kwargs, tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    common = dict(max_epochs=2, limit_train_batches=3, limit_val_batches=1)
    module, data = make(module_kwargs, data_kwargs)
    full = trainer(tmp_path / "full", **common)
    full.fit(module, datamodule=data)
    expected = {k: float(v) for k, v in full.callback_metrics.items()}

    module, data = make(module_kwargs, data_kwargs)
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_top_k=-1)
    half = trainer(tmp_path / "half", enable_checkpointing=True, callbacks=[ckpt], **{**common, "max_epochs": 1})
    half.fit(module, datamodule=data)
    (path,) = glob.glob(str(tmp_path / "ckpt" / "*.ckpt"))

    module, data = make(module_kwargs, data_kwargs, seed=123)  # fresh weights: all must come from the checkpoint
    resumed = trainer(tmp_path / "resumed", **common)
    resumed.fit(module, datamodule=data, ckpt_path=path)
    assert resumed.global_step == full.global_step == 6
    got = {k: float(v) for k, v in resumed.callback_metrics.items()}
    assert got.keys() == expected.keys()
    for k in expected:
        assert got[k] == pytest.approx(expected[k], rel=1e-4, abs=1e-5), k


# ---- decoder-only RE and generator ------------------------------------------------------------
def test_causal_re_and_generator_train_and_evaluate(causal_module_kwargs, causal_data_kwargs, tmp_path):
    module, data = make(causal_module_kwargs, causal_data_kwargs)
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    trainer(tmp_path, max_steps=3, limit_val_batches=1, num_sanity_val_steps=0, val_check_interval=3).fit(
        module, datamodule=data
    )
    changed = {n.split(".")[0] for n, p in module.named_parameters() if not torch.equal(p, before[n])}
    assert changed == {"estimator", "generator"}
    results = module.results["val"]
    assert results and all(isinstance(r["answer"], str) and 0 < r["confidence"] < 1 for r in results)
    assert {"val/em", "val/re_recall@1"} <= set(module.trainer.callback_metrics)


def test_a_frozen_generator_teaches_the_re_alone(causal_module_kwargs, causal_data_kwargs, tmp_path):
    module, data = make({**causal_module_kwargs, "stages": RE_ALONE}, causal_data_kwargs)
    assert not any(p.requires_grad for p in module.generator.parameters())
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    trainer(tmp_path, max_steps=3, limit_val_batches=0).fit(module, datamodule=data)
    changed = {n.split(".")[0] for n, p in module.named_parameters() if not torch.equal(p, before[n])}
    assert changed == {"estimator"}


@pytest.mark.parametrize("lora", [False, True])
def test_gradient_checkpointing_gives_the_same_gradients(causal_module_kwargs, causal_data_kwargs, lora):
    from rerag.models.lora import LoraSpec

    adapters = LoraSpec(r=2, dropout=0.0) if lora else None
    kwargs = changed(causal_module_kwargs, {"assembly.estimator_lora": adapters, "assembly.generator_lora": adapters})
    grads = []
    for checkpointing in (False, True):
        module, data = make(changed(kwargs, {"assembly.gradient_checkpointing": checkpointing}), causal_data_kwargs)
        assert module.estimator.model.is_gradient_checkpointing == checkpointing
        module.train()
        data.setup("fit")
        module.training_step(next(iter(data.train_dataloader())), 0).backward()
        grads.append({n: p.grad for n, p in module.named_parameters() if p.grad is not None})
    assert grads[0] and grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-5, rtol=1e-4)


# ---- per-question test results -----------------------------------------------------------------
def with_gold(path, out):
    """The file with a `gold` flag on each question's first answer-bearing context (as SQuAD files have)."""
    records = [json.loads(line) for line in open(path)]
    for r in records:
        first = next((j for j, c in enumerate(r["ctxs"]) if c["has_answer"]), None)
        for j, c in enumerate(r["ctxs"]):
            c["gold"] = j == first
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def test_test_results_hold_answers_scores_and_first_relevant_ranks(module_kwargs, data_kwargs, tmp_path):
    from rerag.callbacks import MetricsWriter

    records = with_gold(data_kwargs["test_file"], tmp_path / "test.jsonl")
    module, data = make(module_kwargs, {**data_kwargs, "test_file": str(tmp_path / "test.jsonl")})
    writer = MetricsWriter(str(tmp_path / "metrics.json"), str(tmp_path / "results.jsonl"))
    (metrics,) = trainer(tmp_path, callbacks=[writer]).test(module, datamodule=data)
    rows = [json.loads(line) for line in open(tmp_path / "results.jsonl")]
    assert [r["id"] for r in rows] == [r["id"] for r in records]
    k = data_kwargs["n_eval_contexts"]
    for row, record in zip(rows, records):
        first = next((j + 1 for j, c in enumerate(record["ctxs"][:k]) if c["has_answer"]), None)
        assert row["first_hit"]["retriever"] == {"has_answer": first, "gold": first}
        assert row["em"] == exact_match(row["answer"], record["answers"])
    # the logged metrics are the means of the per-question facts
    for order in ("re", "retriever"):
        for name, key in (("has_answer", f"test/{order}_recall@5"), ("gold", f"test/{order}_gold_recall@5")):
            ranks = [r["first_hit"][order][name] for r in rows]
            assert metrics[key] == pytest.approx(sum(x is not None and x <= 5 for x in ranks) / len(rows))
    assert metrics["test/f1_retriever_order"] == pytest.approx(sum(r["f1_retriever_order"] for r in rows) / len(rows))


def test_gold_recall_is_logged_only_for_data_with_gold_flags(module_kwargs, data_kwargs, tmp_path):
    module, data = make(module_kwargs, data_kwargs)
    (metrics,) = trainer(tmp_path).test(module, datamodule=data)
    assert "test/re_recall@1" in metrics and not any("gold" in k for k in metrics)
    assert all(set(r["first_hit"]["re"]) == {"has_answer"} for r in module.results["test"])


@pytest.mark.parametrize("shared", [False, True])
def test_the_estimator_can_have_its_own_learning_rate(causal_module_kwargs, shared):
    from rerag.models.lora import LoraSpec

    lora = LoraSpec(r=2, dropout=0.0)
    kwargs = {
        **causal_module_kwargs,
        "optimizer": OptimizerSpec(lr=1e-4, estimator_lr=3e-3),
        "assembly": AssemblySpec(estimator_lora=lora, generator_lora=lora, shared_base=shared),
    }
    if shared:
        kwargs |= {"generator": None}
    module = RERAGModule(**kwargs)
    module.trainer = trainer(None, max_steps=5)
    re_group, gen_group = module.configure_optimizers()["optimizer"].param_groups
    assert re_group["lr"] == 3e-3 and gen_group["lr"] == 1e-4
    re_ids = {id(p) for p in re_group["params"]}
    named = dict(module.named_parameters())
    assert re_ids == {
        id(p)
        for n, p in named.items()
        if p.requires_grad and n.startswith("estimator.") and (not shared or ".re." in n)
    }
    assert not re_ids & {id(p) for p in gen_group["params"]}


def test_compile_runs_both_models_stacks_compiled(module_kwargs, data_kwargs):
    from torch._dynamo.testing import CompileCounterWithBackend

    from rerag.models.compilation import backbone_stacks

    def stacks(module):
        return backbone_stacks(module.estimator.model) + backbone_stacks(module.generator.model)

    assert all(stack._compiled_call_impl is None for stack in stacks(make(module_kwargs, data_kwargs)[0]))  # default
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("eager")
    module, data = make({**module_kwargs, "assembly": AssemblySpec(compile={"backend": counter})}, data_kwargs)
    assert all(stack._compiled_call_impl is not None for stack in stacks(module))
    data.setup("fit")
    module.training_step(next(iter(data.train_dataloader())), 0).backward()
    assert counter.frame_count == 4  # RE and generator, encoder and decoder each: one graph per stack
    torch._dynamo.reset()


def test_marginalizing_with_the_retriever_trains_the_generator_alone(module_kwargs, data_kwargs):
    """Table 6's baseline: L = L_gen with P = softmax_j(retriever scores); the RE gets no gradient."""
    module, data = make({**module_kwargs, "stages": RETRIEVER_MARGINALIZED}, data_kwargs)
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    loss = module.training_step(batch, 0)
    b, k = len(batch["questions"]), int(batch["n_contexts"][0])
    labels = batch["labels"].repeat_interleave(k, dim=0)
    with torch.no_grad():
        f = module.generator.answer_loglik(batch["gen"]["input_ids"], batch["gen"]["attention_mask"], labels)
    expected = -torch.logsumexp(torch.log_softmax(batch["retriever_scores"].view(b, k), -1) + f.view(b, k), -1).mean()
    assert torch.allclose(loss, expected, atol=1e-5)
    loss.backward()
    assert all(p.grad is None for p in module.estimator.model.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in module.generator.model.parameters())


@pytest.mark.parametrize("per_model", [False, True])
def test_gradients_are_clipped_per_model_when_asked(module_kwargs, per_model):
    module = RERAGModule(**module_kwargs, optimizer=OptimizerSpec(clip_per_model=per_model))
    re_params, generator_params = parameters_by_model(module, module.estimator)
    assert re_params and generator_params
    for params, value in ((re_params, 3.0), (generator_params, 40.0)):  # norms 3 * sqrt(n) and 40 * sqrt(n)
        for p in params:
            p.grad = torch.full_like(p, value)
    module.trainer = trainer(None, max_steps=5)  # Lightning's own clipping reads its trainer's precision plugin
    module.configure_gradient_clipping(module.configure_optimizers()["optimizer"], 1.0, "norm")
    norms = [
        torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in ps])).item()
        for ps in (re_params, generator_params)
    ]
    if per_model:
        assert norms == pytest.approx([1.0, 1.0], rel=1e-4)  # each model's own norm, clipped on its own
    else:
        assert sum(n**2 for n in norms) ** 0.5 == pytest.approx(1.0, rel=1e-4)  # one global norm
        assert norms[0] < 0.2  # the generator's large gradient shrank the RE's far below the clip


def test_the_pointwise_objective_trains_the_re_on_labels_and_never_reads_the_generator(module_kwargs, data_kwargs):
    """The MonoT5-style baseline: cross-entropy of "true"/"false" against has_answer, per context."""
    module, data = make({**module_kwargs, "stages": POINTWISE}, data_kwargs)
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))

    def no_generator(*args, **kwargs):
        raise AssertionError("the pointwise objective read the generator")

    module.generator.answer_loglik = no_generator
    module.generator.model.forward = no_generator
    loss = module.training_step(batch, 0)
    with torch.no_grad():
        t, f = module.estimator.true_false_logprobs(batch["re"]["input_ids"], batch["re"]["attention_mask"])
    y = batch["has_answer"].float()
    assert 0 < y.sum() < len(y)  # both labels present, so both terms are checked
    assert torch.allclose(loss, -(y * t + (1 - y) * f).mean(), atol=1e-5)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in module.estimator.model.parameters())


def test_the_learning_rate_warms_up_then_decays_to_zero_at_the_last_step(module_kwargs, data_kwargs, tmp_path):
    from lightning.pytorch.callbacks import Callback

    class Rates(Callback):
        def __init__(self):
            self.seen = []

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.seen.append(trainer.optimizers[0].param_groups[0]["lr"])

    optimizer = OptimizerSpec(lr=1e-3, lr_schedule="cosine", warmup_steps=2)
    module, data = make({**module_kwargs, "optimizer": optimizer}, data_kwargs)
    rates = Rates()
    trainer(tmp_path, max_steps=6, callbacks=[rates]).fit(module, datamodule=data)
    # warm-up 0, 0.5e-3; then cosine from 1e-3 over the 4 steps left: 1e-3, 0.854e-3, 0.5e-3, 0.146e-3
    assert rates.seen == pytest.approx([0.0, 5e-4, 1e-3, 8.536e-4, 5e-4, 1.464e-4], abs=1e-6)


@pytest.mark.parametrize("schedule", ["run", "stage"])
def test_each_models_rate_follows_its_stages(module_kwargs, data_kwargs, tmp_path, schedule):
    """A frozen-teacher stage of 2 steps, then a joint one. The RE trains in both: with schedule run its
    rate warms up and decays over the run's 6 steps, with schedule stage it restarts at step 2. The
    generator trains in the joint stage alone: its rate is 0 for 2 steps, then warms up and decays
    over the 4 joint steps either way."""
    from lightning.pytorch.callbacks import Callback

    class Rates(Callback):
        def __init__(self):
            self.seen = []

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.seen.append({g["name"]: g["lr"] for g in trainer.optimizers[0].param_groups})

    stages = [
        {"steps": 2, "train": "estimator", "re_learns_from": "teacher", "schedule": schedule},
        {"schedule": schedule},
    ]
    optimizer = OptimizerSpec(lr=1e-3, estimator_lr=2e-3, lr_schedule="cosine", warmup_steps=2)
    kwargs = {"optimizer": optimizer, "stages": stages}
    module, data = make({**module_kwargs, **kwargs}, data_kwargs)
    rates = Rates()
    trainer(tmp_path, max_steps=6, callbacks=[rates]).fit(module, datamodule=data)
    run = [0.0, 0.5, 1.0, 0.8536, 0.5, 0.1464]  # warm-up 2, cosine over the 4 steps left
    joint = [0.0, 0.0, 0.0, 0.5, 1.0, 0.5]  # nothing for 2 steps, then warm-up 2, cosine over the 2 left
    by_stage = [0.0, 0.5, *joint[2:]]  # warm-up over the first stage's 2 steps, then restarted
    re_rates = run if schedule == "run" else by_stage
    assert [r["estimator"] for r in rates.seen] == pytest.approx([2e-3 * f for f in re_rates], abs=1e-6)
    assert [r["generator"] for r in rates.seen] == pytest.approx([1e-3 * f for f in joint], abs=1e-6)


@pytest.mark.parametrize(
    "field, value",
    [
        ("optimizer.lr_schedule", "step"),
        ("loss.gen_reduction", "Sum"),  # would otherwise pass as a mean
        ("loss.kl_direction", "forward"),
        ("evaluation.window_pooling", "median"),  # would otherwise fail only at the first validation
        ("loss.re_clamp", 0.0),  # would otherwise fail at the first step (log 0)
        ("loss.re_clamp", 0.5),
        ("inputs.max_answer_length", 0),
    ],
)
def test_a_setting_outside_its_choices_is_a_clear_error_before_any_model_loads(module_kwargs, field, value):
    with pytest.raises(ValueError, match=re.escape(f"model.{field}")):
        RERAGModule(**changed(module_kwargs, {field: value}))


def test_a_bad_model_spec_is_a_clear_error_naming_its_field(module_kwargs):
    bad = ModelSpec(config=module_kwargs["generator"].config, dtype="bfloat")
    with pytest.raises(ValueError, match=r"model\.generator\.dtype: 'bfloat'"):
        RERAGModule(**{**module_kwargs, "generator": bad})


def test_a_teacher_temperature_not_above_zero_is_a_clear_error(module_kwargs):
    with pytest.raises(ValueError, match=r"model\.loss\.teacher_temperature"):
        RERAGModule(**changed(module_kwargs, {"loss.teacher_temperature": 0.0}))


def test_evaluation_scores_with_the_re_adapter_merged_and_drops_the_copy(
    causal_module_kwargs, causal_data_kwargs, tmp_path
):
    from rerag.models.lora import LoraSpec

    lora = LoraSpec(r=2, dropout=0.0)
    kwargs = {
        **causal_module_kwargs,
        "assembly": AssemblySpec(estimator_lora=lora, generator_lora=lora, shared_base=True),
    }
    module, data = make({**kwargs, "generator": None}, causal_data_kwargs)
    for name, p in module.named_parameters():
        if "lora_B" in name and ".re." in name:
            torch.nn.init.normal_(p, std=0.5)
    keys = set(module.state_dict())
    scorers = []
    for_scoring = module.estimator.for_scoring
    module.estimator.for_scoring = lambda: scorers.append(for_scoring()) or scorers[-1]
    (merged,) = trainer(tmp_path).validate(module, datamodule=data)
    assert scorers and scorers[0] is not module.estimator  # the merged copy scored
    assert module.evaluator.scoring is None and set(module.state_dict()) == keys
    module.estimator.merge_for_scoring = False
    (unmerged,) = trainer(tmp_path).validate(module, datamodule=data)
    assert scorers[-1] is module.estimator
    assert merged == pytest.approx(unmerged, abs=1e-6)
