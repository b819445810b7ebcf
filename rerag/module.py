"""RERAGModule: the LightningModule that trains the relevance estimator and the generator stage by
stage (RE-RAG 2.3, `rerag.stages`) and evaluates RE-reranked, RE-marginalized answers (2.2). It
orchestrates; what it calls lives in its own files."""

from __future__ import annotations

import dataclasses
import math
import warnings

import lightning as L
import torch
from lightning.pytorch.trainer.states import TrainerFn

from rerag.assembly import AssemblySpec, build_models, generator_spec
from rerag.callbacks import unreachable
from rerag.defaults import VERSION
from rerag.evaluation import EvaluationSpec, Evaluator, evaluation_metrics
from rerag.inputs import InputSpec
from rerag.losses import LossSpec, marginal_nll, pointwise_relevance, rerag_loss
from rerag.metrics import teacher_margin
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec
from rerag.optimization import OptimizerSpec, clip_each_model, optimizer_and_schedule, parameters_by_model
from rerag.settings import check_settings
from rerag.stages import Plan, Stage
from rerag.teacher_cache import TeacherScores, TeacherSpec, read_or_build, teacher_for_cache


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
        inputs: InputSpec = InputSpec(),
        stages: list[Stage] | None = None,
        loss: LossSpec = LossSpec(),
        optimizer: OptimizerSpec = OptimizerSpec(),
        assembly: AssemblySpec = AssemblySpec(),
        teacher: TeacherSpec | None = None,
        evaluation: EvaluationSpec = EvaluationSpec(),
    ):
        """Joint RE-RAG training (eq. 12) and RE-reranked evaluation.

        Args:
            estimator: the RE's model: a checkpoint (`name_or_path`, `package:path` or a GGUF file) or a config for random init.
            generator: the generator's model (None with `assembly.shared_base`: the estimator's base serves both).
            inputs: the text each model reads and writes (`rerag.inputs.InputSpec`); the datamodule reads the same.
            stages: the training method, stage by stage (`rerag.stages.Stage`); None: [Stage()], the paper's joint training.
            loss: eq. 12's weights and variants (`rerag.losses.LossSpec`).
            optimizer: AdamW and its schedule (`rerag.optimization.OptimizerSpec`).
            assembly: how the models are built and run: LoRA, a shared base, checkpointing, compile (`rerag.assembly.AssemblySpec`).
            teacher: the frozen teacher's cache (`rerag.teacher_cache.TeacherSpec`; None: no cache).
            evaluation: how dev, test and predict read (`rerag.evaluation.EvaluationSpec`).
        """
        super().__init__()
        self.save_hyperparameters()
        self.inputs, self.loss, self.optimizer_spec = inputs, loss, optimizer
        self.assembly, self.teacher, self.evaluation = assembly, teacher, evaluation
        #: the training method (`rerag.stages`); a Python caller may give each stage as a dict
        self.stages = [Stage(**s) if isinstance(s, dict) else s for s in (stages or [Stage()])]
        specs = {"inputs": inputs, "loss": loss, "optimizer": optimizer, "assembly": assembly}
        check_settings(
            specs | {"teacher": teacher, "evaluation": evaluation},
            self.stages,
            {"estimator": estimator, "generator": generator},
        )  # before any model loads
        self.estimator, self.generator = build_models(
            estimator,
            generator,
            inputs,
            assembly,
            window_pooling=evaluation.window_pooling,
            generator_never_trains=not any("generator" in stage.models for stage in self.stages),
        )
        self.metrics = evaluation_metrics(evaluation.recall_ks, evaluation.eval_depths)
        self.evaluator = Evaluator(self.estimator, self.generator, evaluation)
        self.results: dict[str, list[dict]] = {"val": [], "test": []}  # per question, this process's share
        self.teacher_scores: TeacherScores | None = None  # set at fit start with a teacher cache
        self.teacher_cache_key: str | None = None  # its file's name; a resumed run keeps the one it began with
        self.teacher_model = (teacher and teacher.model) or generator_spec(assembly.shared_base, estimator, generator)
        self.generated_at_step = -1  # the step at which the evaluator's answer cache was started
        self.checkpoint_step: int | None = None  # the optimizer step of the checkpoint last loaded

    # ---- the frozen teacher's cache ------------------------------------------------------------
    def on_fit_start(self) -> None:
        """Warn of a stage or warm-up this fit does not reach. With `model.teacher`: read the
        teacher's F_ij for every training pair the fit's epochs draw (`training_epochs`) from the
        cache, or compute and write them first, each process its share (`rerag.teacher_cache.read_or_build`)."""
        self.evaluator.generated, self.generated_at_step = {}, -1  # answers are kept within one fit only
        self.warn_of_unreached_stages()
        if self.teacher is None:
            return
        teacher, identity = self.frozen_teacher()
        self.teacher_scores, self.teacher_cache_key = read_or_build(
            teacher,
            identity,
            self.trainer,
            self.training_epochs(),
            cache_dir=self.teacher.cache_dir,
            began_with=self.teacher_cache_key,
            batch_size=self.evaluation.score_batch_size,
            question_template=self.teacher.question_template,
            share_timeout=self.teacher.share_timeout,
        )

    def frozen_teacher(self) -> tuple[Generator, dict]:
        """The teacher the cache is scored with, and what identifies it (`teacher_for_cache`)."""
        first = next(i for i, stage in enumerate(self.stages) if stage.re_learns_from == "teacher")
        return teacher_for_cache(
            self.generator,
            template=self.teacher.template or self.inputs.generator_template,
            tokenizer_name=self.inputs.generator_tokenizer,
            adapters_off=any("generator" in stage.models for stage in self.stages[:first]),
            other=self.teacher.model,
            other_tokenizer=self.teacher.tokenizer,
            spec=self.teacher_model,
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
        end, warmup = self.trainer.estimated_stepping_batches, self.optimizer_spec.warmup_steps
        if late := [f"{name} {step}" for name, step in self.stage_ends().items() if step >= end]:
            warnings.warn(f"this fit ends at optimizer step {end}: no step follows {', '.join(late)}", stacklevel=2)
        if warmup:
            starts = self.plan().schedule_starts()
            unreachable(self.trainer, [("the end of model.optimizer.warmup_steps", start + warmup) for start in starts])

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
        b, k = len(batch["questions"]), int(batch["n_contexts"][0])
        index = Plan(self.stages).index(self.global_step)
        stage = self.stages[index]
        if len(self.stages) > 1:
            self.log("train/stage", float(index), batch_size=b)
        if stage.re_learns_from == "labels":  # MonoT5: per context, on the label; the generator never runs
            log_p_true, log_p_false = self.estimator.true_false_logprobs(
                batch["re"]["input_ids"], batch["re"]["attention_mask"], backend=self.assembly.kernel_backend
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
            if self.teacher_scores is not None and self.teacher.question_template is not None and stage.train == "both":
                # the teacher's log P(q | c), fixed, plus the live log P_G(a | q, c): the target keeps its question term
                question_loglik = self.teacher_scores.question_lookup(batch["questions"], batch["contexts"])
                answer_loglik = answer_loglik + question_loglik.to(answer_loglik)
        if stage.marginalize_with == "retriever":  # RAG without the RE: the RE is not even run
            scores = batch["retriever_scores"].view(b, k).to(answer_loglik.device)
            losses = {"loss_gen": marginal_nll(scores, answer_loglik, self.loss.gen_reduction)}
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
        b, k = answer_loglik.shape
        log_p_true, log_p_false = self.estimator.true_false_logprobs(
            batch["re"]["input_ids"], batch["re"]["attention_mask"], backend=self.assembly.kernel_backend
        )
        return rerag_loss(
            log_p_true.view(b, k),
            log_p_false.view(b, k),
            answer_loglik,
            has_answer=batch["has_answer"].view(b, k),
            **dataclasses.asdict(self.loss),
        )

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """`trainer.gradient_clip_val` as Lightning applies it, or with `optimizer.clip_per_model` (norm
        clipping) to the RE's and the generator's gradients each on its own (`clip_each_model`)."""
        if not (self.optimizer_spec.clip_per_model and gradient_clip_val) or gradient_clip_algorithm == "value":
            return super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)
        clip_each_model(parameters_by_model(self, self.estimator), gradient_clip_val)

    def configure_optimizers(self):
        return optimizer_and_schedule(parameters_by_model(self, self.estimator), self.plan(), self.optimizer_spec)

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
        results, logged = self.evaluator.evaluate(batch, stage, self.evaluation.top_k(stage), self.metrics)
        self.results[stage] += results
        for metrics, batch_size in logged:
            self.log_dict(metrics, batch_size=batch_size, prog_bar=False)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def predict_step(self, batch: dict, batch_idx: int) -> list[dict]:
        """One prediction per question: RE top-k, eq. 6 answer, confidence = max_j RE_ij."""
        return self.evaluator.read(batch, self.evaluation.test_top_k)[1]
