"""RERAGModule: the LightningModule that trains the relevance estimator and the generator stage by
stage (RE-RAG 2.3, `rerag.stages`) and evaluates RE-reranked, RE-marginalized answers (2.2). It
orchestrates; what it calls lives in its own files."""

from __future__ import annotations

import math
import warnings
from typing import Literal, get_type_hints

import lightning as L
import torch
from lightning.pytorch.trainer.states import TrainerFn

from rerag.assembly import build_models, generator_spec
from rerag.callbacks import unreachable
from rerag.defaults import TEST_TOP_K, VAL_TOP_K, VERSION
from rerag.evaluation import Evaluator, evaluation_metrics
from rerag.losses import marginal_nll, pointwise_relevance, rerag_loss
from rerag.metrics import teacher_margin
from rerag.models.compilation import CompileSetting
from rerag.models.estimator import WindowPooling
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec
from rerag.models.lora import LoraSpec
from rerag.optimization import clip_each_model, optimizer_and_schedule, parameters_by_model
from rerag.prompts import DEFAULT_TEMPLATE
from rerag.settings import check_settings
from rerag.stages import Plan, Stage
from rerag.teacher_cache import TeacherScores, read_or_build, teacher_for_cache


def check_checkpoint_version(checkpoint: dict, path) -> None:
    """Refuse a checkpoint another minor version of rerag wrote (0.1 checkpoints record none): its
    hyperparameters name settings this version does not have (docs/migration.md)."""
    written = checkpoint.get("rerag_version", "0.1")
    if written.split(".")[:2] != VERSION.split(".")[:2]:
        raise ValueError(
            f"{path}: a rerag {written} checkpoint; rerag {VERSION} reads its own minor version only "
            "(docs/migration.md): export or test it with the rerag that wrote it, or train again"
        )


class RERAGModule(L.LightningModule):
    """RE-RAG's training (2.3), stage by stage (`rerag.stages`), and RE-reranked, RE-marginalized
    evaluation (2.2). It wires parts that live in their own files: the models (`rerag.assembly`), the
    teacher cache (`rerag.teacher_cache`), the losses (`rerag.losses`), the optimizer
    (`rerag.optimization`) and evaluation (`rerag.evaluation`). Each argument is documented in
    `__init__`."""

    def __init__(
        self,
        estimator: ModelSpec,
        generator: ModelSpec | None = None,
        re_tokenizer: str = "t5-base",
        generator_tokenizer: str = "t5-base",
        re_template: str = DEFAULT_TEMPLATE,
        re_max_length: int = 256,
        generator_template: str = DEFAULT_TEMPLATE,
        generator_max_length: int = 256,
        max_answer_length: int = 16,
        true_word: str = "true",
        false_word: str = "false",
        alpha_re: float = 1.0,
        alpha_tok: float = 1.0,
        alpha_anchor: float = 0.0,
        kl_direction: Literal["generator_to_re", "re_to_generator"] = "generator_to_re",
        teacher_temperature: float = 1.0,
        lr: float = 1e-4,
        estimator_lr: float | None = None,
        lr_schedule: Literal["constant", "linear", "cosine"] = "constant",
        warmup_steps: int = 0,
        weight_decay: float = 1e-3,
        val_top_k: int = VAL_TOP_K,
        test_top_k: int = TEST_TOP_K,
        num_beams: int = 1,
        score_batch_size: int = 128,
        recall_ks: list[int] = [1, 5, 10, 20],
        eval_depths: list[int] = [],
        kernel_backend: Literal["triton", "reference"] | None = None,
        estimator_lora: LoraSpec | None = None,
        generator_lora: LoraSpec | None = None,
        shared_base: bool = False,
        stages: list[Stage] | None = None,
        gradient_checkpointing: bool = False,
        compile: CompileSetting = False,
        normalize_re: bool = True,
        gen_reduction: Literal["mean", "sum"] = "mean",
        re_clamp: float | None = None,
        gradient_clip_per_model: bool = False,
        teacher_cache_dir: str | None = None,
        teacher: ModelSpec | None = None,
        teacher_tokenizer: str | None = None,
        teacher_template: str | None = None,
        teacher_question_template: str | None = None,
        window_pooling: WindowPooling = "max",
    ):
        """Joint RE-RAG training (eq. 12) and RE-reranked evaluation.

        Args:
            estimator: the RE's model: a checkpoint (`name_or_path`, `package:path` or a GGUF file) or a config for random init.
            generator: the generator's model (None with `shared_base`: the estimator's base serves both).
            re_tokenizer: the RE's tokenizer name or folder.
            generator_tokenizer: the generator's tokenizer name or folder.
            re_template: the RE's input text, filled with {question}, {title}, {text}, {context}.
            re_max_length: RE input tokens (the passage is cut, never the template).
            generator_template: the generator's input text (same fields).
            generator_max_length: generator input tokens.
            max_answer_length: answer tokens, the EOS included (labels and generation).
            true_word: the RE's positive label word; one token at the first answer position.
            false_word: the RE's negative label word; one token there.
            alpha_re: weight a1 of L_re, the KL between the generator's Q_G and P_RE (eq. 10); at least 0.
            alpha_tok: weight a2 of L_tok, the RE's off-label mass (eq. 11); at least 0.
            alpha_anchor: weight of BCE(sigmoid(s), has_answer), not in the paper (0: off); at least 0.
            kl_direction: generator_to_re = KL(Q_G || P_RE) (released code) or re_to_generator (eq. 10 as printed).
            teacher_temperature: Q_G = softmax_j(F / T) in L_re (1: eq. 9; above 1 softens the teacher, not in the paper); L_gen keeps F.
            lr: AdamW's peak learning rate, the generator's where estimator_lr is set (paper 1e-4, constant).
            estimator_lr: the RE's own learning rate (None: lr).
            lr_schedule: constant (the paper), or linear or cosine decay to 0 (transformers' schedules), over the span each stage's `schedule` says.
            warmup_steps: optimizer steps of linear warm-up from 0 before the schedule (0: none).
            weight_decay: AdamW weight decay (paper 1e-3).
            val_top_k: contexts the RE keeps for dev answers (paper 10); at least 1.
            test_top_k: contexts the RE (and the retriever baseline) keeps for test answers (paper 25); at least 1.
            num_beams: beams per context when generating (1: greedy).
            score_batch_size: rows per forward pass without gradients: the RE's at evaluation, the teacher's when it builds its cache.
            recall_ks: Recall@k cut-offs logged at evaluation.
            eval_depths: also rerank only the retriever's first d contexts (metrics <stage>/top<d>/...).
            kernel_backend: the true/false log-prob kernel: None (Triton on CUDA, else the reference), triton or reference.
            estimator_lora: LoRA adapters for the RE (None: full fine-tuning).
            generator_lora: LoRA adapters for the generator (None: full fine-tuning, or none when frozen).
            shared_base: RE and generator as two adapters ("re", "generator") of one frozen base.
            stages: the training method, stage by stage (`rerag.stages.Stage`: steps, train, re_learns_from, marginalize_with, schedule); None: [Stage()], the paper's joint training.
            gradient_checkpointing: recompute activations in the backward pass (memory for time).
            compile: torch.compile the models' stacks (true, or a dict of torch.compile arguments).
            normalize_re: eq. 3's log-odds (true) or s = log p_true (Table 7's ablation).
            gen_reduction: L_gen's reduction over a batch's questions: mean, or sum as the released code does.
            re_clamp: clamp RE_ij to [eps, 1 - eps] before the log-odds, as the released code does with 1e-5 (None: off).
            gradient_clip_per_model: clip the RE's and the generator's gradient norms each on its own to trainer.gradient_clip_val.
            teacher_cache_dir: with a stage whose RE learns from the teacher, compute the teacher's F_ij of every training pair the fit's epochs draw once and keep them in this folder.
            teacher: any Hugging Face LM as the teacher (None: the frozen generator); needs teacher_cache_dir.
            teacher_tokenizer: the teacher's tokenizer (None: the teacher's name_or_path).
            teacher_template: the teacher's input text (None: generator_template).
            teacher_question_template: a passage without the question, after which the frozen teacher scores the question: F_ij = log P_T(a_i | q_i, c_j) + log P_T(q_i | c_j) (None: the answer alone, eq. 8); in a stage that learns from the live generator the cached log P_T(q_i | c_j) is added to its F.
            window_pooling: where data.init_args.eval_context_words cuts dev/test passages into windows, a passage's s from its windows': max (MaxP), mean, or first (FirstP); `rerag export` keeps it.
        """
        super().__init__()
        self.save_hyperparameters()
        #: the training method (`rerag.stages`); a Python caller may give each stage as a dict
        self.stages = [Stage(**s) if isinstance(s, dict) else s for s in (stages or [Stage()])]
        check_settings(
            self.hparams,
            self.stages,
            get_type_hints(RERAGModule.__init__),
            {"estimator": estimator, "generator": generator, "teacher": teacher},
        )  # before any model loads
        self.estimator, self.generator = build_models(
            estimator=estimator,
            generator=generator,
            re_tokenizer=re_tokenizer,
            generator_tokenizer=generator_tokenizer,
            re_template=re_template,
            re_max_length=re_max_length,
            generator_template=generator_template,
            generator_max_length=generator_max_length,
            max_answer_length=max_answer_length,
            true_word=true_word,
            false_word=false_word,
            window_pooling=window_pooling,
            estimator_lora=estimator_lora,
            generator_lora=generator_lora,
            shared_base=shared_base,
            generator_never_trains=not any("generator" in stage.models for stage in self.stages),
            gradient_checkpointing=gradient_checkpointing,
            compile=compile,
        )
        self.metrics = evaluation_metrics(recall_ks, eval_depths)
        self.evaluator = Evaluator(self.estimator, self.generator, score_batch_size, num_beams, eval_depths)
        self.results: dict[str, list[dict]] = {"val": [], "test": []}  # per question, this process's share
        self.teacher_scores: TeacherScores | None = None  # set at fit start with teacher_cache_dir
        self.teacher_cache_key: str | None = None  # its file's name; a resumed run keeps the one it began with
        self.teacher_spec = teacher or generator_spec(shared_base, estimator, generator)
        self.generated_at_step = -1  # the step at which the evaluator's answer cache was started
        self.checkpoint_step: int | None = None  # the optimizer step of the checkpoint last loaded

    # ---- the frozen teacher's cache ------------------------------------------------------------
    def on_fit_start(self) -> None:
        """Warn of a stage or warm-up this fit does not reach. With `teacher_cache_dir`: read the
        teacher's F_ij for every training pair the fit's epochs draw (`training_epochs`) from the
        cache, or compute and write them first (`rerag.teacher_cache.read_or_build`)."""
        hp = self.hparams
        self.evaluator.generated, self.generated_at_step = {}, -1  # answers are kept within one fit only
        self.warn_of_unreached_stages()
        if hp.teacher_cache_dir is None:
            return
        teacher, identity = self.frozen_teacher()
        self.teacher_scores, self.teacher_cache_key = read_or_build(
            teacher,
            identity,
            self.trainer,
            self.training_epochs(),
            cache_dir=hp.teacher_cache_dir,
            began_with=self.teacher_cache_key,
            batch_size=hp.score_batch_size,
            question_template=hp.teacher_question_template,
        )

    def frozen_teacher(self) -> tuple[Generator, dict]:
        """The teacher the cache is scored with, and what identifies it (`teacher_for_cache`)."""
        hp = self.hparams
        first = next(i for i, stage in enumerate(self.stages) if stage.re_learns_from == "teacher")
        return teacher_for_cache(
            self.generator,
            template=hp.teacher_template or hp.generator_template,
            tokenizer_name=hp.generator_tokenizer,
            adapters_off=any("generator" in stage.models for stage in self.stages[:first]),
            other=self.teacher_spec if hp.teacher is not None else None,
            other_tokenizer=hp.teacher_tokenizer,
            spec=self.teacher_spec,
        )

    def training_epochs(self) -> int | None:
        """How many epochs this fit starts (the last may end early, at max_steps), from the optimizer
        steps the trainer will take: what the teacher cache needs (None: no end is set)."""
        steps = self.trainer.estimated_stepping_batches
        if steps == float("inf"):
            return None
        self.trainer.fit_loop.setup_data()  # the train loader's length (set up already, unless max_steps alone ends the fit)
        # Lightning steps the optimizer at an epoch's end even when the epoch's last accumulation is short
        per_epoch = math.ceil(self.trainer.num_training_batches / self.trainer.accumulate_grad_batches)
        return math.ceil(steps / per_epoch)

    def plan(self) -> Plan:
        """The stages placed on this fit's optimizer steps."""
        return Plan(self.stages, self.trainer.estimated_stepping_batches)

    def stage_ends(self) -> dict[str, int]:
        """The optimizer step at which each stage but the last ends, named by its config key."""
        return {f"model.stages[{i}]": end for i, end in enumerate(self.plan().boundaries())}

    def warn_of_unreached_stages(self) -> None:
        """Warn where this fit ends before a stage after the first gets a step, or before a warm-up ends."""
        hp, end = self.hparams, self.trainer.estimated_stepping_batches
        if late := [f"{name} {step}" for name, step in self.stage_ends().items() if step >= end]:
            warnings.warn(f"this fit ends at optimizer step {end}: no step follows {', '.join(late)}", stacklevel=2)
        if hp.warmup_steps:
            starts = self.plan().schedule_starts()
            unreachable(self.trainer, [("the end of model.warmup_steps", start + hp.warmup_steps) for start in starts])

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["rerag_version"] = VERSION
        if self.teacher_cache_key is not None:
            checkpoint["teacher_cache_key"] = self.teacher_cache_key

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        check_checkpoint_version(checkpoint, "the checkpoint")
        self.teacher_cache_key = checkpoint.get("teacher_cache_key")
        self.checkpoint_step = checkpoint.get("global_step")  # the step the loaded weights come from

    # ---- training -------------------------------------------------------------------------
    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        hp = self.hparams
        b, k = len(batch["questions"]), int(batch["n_contexts"][0])
        index = Plan(self.stages).index(self.global_step)
        stage = self.stages[index]
        if len(self.stages) > 1:
            self.log("train/stage", float(index), batch_size=b)
        if stage.re_learns_from == "labels":  # MonoT5: per context, on the label; the generator never runs
            log_p_true, log_p_false = self.estimator.true_false_logprobs(
                batch["re"]["input_ids"], batch["re"]["attention_mask"], backend=hp.kernel_backend
            )
            losses = {"loss": pointwise_relevance(log_p_true, log_p_false, batch["has_answer"])}
            self.log_dict({f"train/{n}": v for n, v in losses.items()}, prog_bar=True, batch_size=b)
            return losses["loss"]
        if self.teacher_scores is not None and stage.re_learns_from == "teacher":  # computed once at fit start
            answer_loglik = self.teacher_scores.lookup(batch["questions"], batch["targets"], batch["contexts"])
            answer_loglik = answer_loglik.to(self.device)
        else:
            labels = batch["labels"].repeat_interleave(k, dim=0)
            with torch.set_grad_enabled("generator" in stage.models):
                answer_loglik = self.generator.answer_loglik(
                    batch["gen"]["input_ids"], batch["gen"]["attention_mask"], labels
                ).view(b, k)
            if self.teacher_scores is not None and hp.teacher_question_template is not None and stage.train == "both":
                # the teacher's log P(q | c), fixed, plus the live log P_G(a | q, c): the target keeps its question term
                question_loglik = self.teacher_scores.question_lookup(batch["questions"], batch["contexts"])
                answer_loglik = answer_loglik + question_loglik.to(answer_loglik)
        if stage.marginalize_with == "retriever":  # RAG without the RE: the RE is not even run
            scores = batch["retriever_scores"].view(b, k).to(answer_loglik.device)
            losses = {"loss_gen": marginal_nll(scores, answer_loglik, hp.gen_reduction)}
            losses["loss"] = losses["loss_gen"]
        else:
            losses = self.relevance_losses(batch, answer_loglik)
        self.log_dict({f"train/{n}": v for n, v in losses.items()}, prog_bar=True, batch_size=b)
        if "gold" in batch and (margin := teacher_margin(answer_loglik, batch["gold"].view(b, k))) is not None:
            self.log("train/teacher_margin", margin, batch_size=b)
        return losses["loss"]

    def relevance_losses(self, batch: dict, answer_loglik: torch.Tensor) -> dict[str, torch.Tensor]:
        """The RE's forward pass and eq. 12's losses with the module's weights, given the
        generator's F_ij [b, k] (computed in the step, or the frozen teacher's, from its cache)."""
        hp = self.hparams
        b, k = answer_loglik.shape
        log_p_true, log_p_false = self.estimator.true_false_logprobs(
            batch["re"]["input_ids"], batch["re"]["attention_mask"], backend=hp.kernel_backend
        )
        return rerag_loss(
            log_p_true.view(b, k),
            log_p_false.view(b, k),
            answer_loglik,
            alpha_re=hp.alpha_re,
            alpha_tok=hp.alpha_tok,
            kl_direction=hp.kl_direction,
            alpha_anchor=hp.alpha_anchor,
            has_answer=batch["has_answer"].view(b, k),
            normalized=hp.normalize_re,
            gen_reduction=hp.gen_reduction,
            re_clamp=hp.re_clamp,
            teacher_temperature=hp.teacher_temperature,
        )

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """`trainer.gradient_clip_val` as Lightning applies it, or with `gradient_clip_per_model` (norm
        clipping) to the RE's and the generator's gradients each on its own (`clip_each_model`)."""
        if not (self.hparams.gradient_clip_per_model and gradient_clip_val) or gradient_clip_algorithm == "value":
            return super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)
        clip_each_model(parameters_by_model(self, self.estimator), gradient_clip_val)

    def configure_optimizers(self):
        hp = self.hparams
        return optimizer_and_schedule(
            parameters_by_model(self, self.estimator),
            self.plan(),
            lr=hp.lr,
            estimator_lr=hp.estimator_lr,
            weight_decay=hp.weight_decay,
            lr_schedule=hp.lr_schedule,
            warmup_steps=hp.warmup_steps,
        )

    # ---- evaluation -----------------------------------------------------------------------
    def relevance_scores(self, batch: dict) -> torch.Tensor:
        """The RE's log-odds s of every flattened (question, context) row (`Evaluator.relevance_scores`)."""
        return self.evaluator.relevance_scores(batch)

    def fix_scoring_estimator(self, fixed: bool) -> None:
        """From the start of an evaluation epoch to its end the RE's weights stay fixed, so it scores
        with `RelevanceEstimator.for_scoring` (on a CPU in float32, a copy with its adapter merged);
        the copy is dropped at the end, before training moves the weights. Held by the evaluator, out
        of the module's submodules, so out of checkpoints and `state_dict`."""
        self.evaluator.scoring = self.estimator.for_scoring() if fixed else None

    def keep_or_reset_answers(self) -> None:
        """Within one fit a generator that no later stage trains reads a dev prompt to the same answer
        at every validation, so its answers are kept from one to the next; otherwise, and at every
        test or validate, they are generated afresh."""
        fitting = self.trainer.state.fn == TrainerFn.FITTING
        last_trained = Plan(self.stages).last_training_end("generator")
        if not (fitting and self.generated_at_step >= last_trained):
            self.evaluator.generated, self.generated_at_step = {}, self.global_step

    def _start_evaluation(self, stage: str | None) -> None:
        """An evaluation epoch begins: the RE's weights are fixed until it ends; val and test start
        their per-question results and keep or reset the answer cache."""
        self.fix_scoring_estimator(True)
        if stage is not None:
            self.results[stage] = []
            self.keep_or_reset_answers()

    def on_validation_epoch_start(self) -> None:
        self._start_evaluation("val")

    def on_test_epoch_start(self) -> None:
        self._start_evaluation("test")

    def on_predict_epoch_start(self) -> None:
        self._start_evaluation(None)

    def _end_evaluation(self) -> None:
        self.fix_scoring_estimator(False)

    on_validation_epoch_end = on_test_epoch_end = on_predict_epoch_end = _end_evaluation

    def _evaluate(self, batch: dict, stage: str) -> None:
        top_k = self.hparams.val_top_k if stage == "val" else self.hparams.test_top_k
        results, logged = self.evaluator.evaluate(batch, stage, top_k, self.metrics)
        self.results[stage] += results
        for metrics, batch_size in logged:
            self.log_dict(metrics, batch_size=batch_size, prog_bar=False)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def predict_step(self, batch: dict, batch_idx: int) -> list[dict]:
        """One prediction per question: RE top-k, eq. 6 answer, confidence = max_j RE_ij."""
        return self.evaluator.read(batch, self.hparams.test_top_k)[1]
