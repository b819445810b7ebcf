"""RERAGModule: joint training of the relevance estimator and the generator (RE-RAG 2.3),
and RE-reranked, RE-marginalized evaluation (2.2). It orchestrates; the models, losses,
decoding and metrics it calls live in their own files."""

from __future__ import annotations

import math
import warnings
from functools import partial
from pathlib import Path
from typing import Literal, get_args, get_origin, get_type_hints

import lightning as L
import torch
from lightning.pytorch.trainer.states import TrainerFn
from torchmetrics import MeanMetric, MetricCollection
from transformers import get_scheduler

from erag.answers import exact_match, token_f1
from erag.lm import BASE_ADAPTER, load_tokenizer
from rerag.callbacks import unreachable
from rerag.data.datamodule import first_contexts, first_rows
from rerag.decoding import marginalize_answers, top_k_per_question
from rerag.defaults import TEST_TOP_K, VAL_TOP_K
from rerag.losses import marginal_nll, pointwise_relevance, rerag_loss
from rerag.metrics import first_hit_rank, recall_at_k, teacher_margin
from rerag.models.compilation import CompileSetting, compile_stacks
from rerag.models.estimator import RelevanceEstimator, WindowPooling, pool_windows
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, build_model
from rerag.models.lora import LoraSpec, add_adapters, add_lora
from rerag.prompts import DEFAULT_TEMPLATE
from rerag.teacher_cache import (
    MAX_QUESTION_TOKENS,
    TeacherScores,
    build_teacher_scores,
    teacher_key,
    weights_fingerprint,
)

#: `lr_schedule` -> the transformers schedule it runs (a constant rate still warms up when warmup_steps > 0).
LR_SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}


def schedule_factor(hparams, steps: int):
    """transformers' `lr_schedule` with `warmup_steps` over `steps` optimizer steps, as the
    step -> learning-rate factor that torch's LambdaLR takes (read off a one-parameter probe)."""
    probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    name = LR_SCHEDULES[hparams.lr_schedule]
    return get_scheduler(name, probe, num_warmup_steps=hparams.warmup_steps, num_training_steps=steps).lr_lambdas[0]


def after_step(start: int, factor, step: int) -> float:
    """`factor` counted from optimizer step `start` (0 before it)."""
    return factor(step - start) if step >= start else 0.0


def before_step(end: int, factor, step: int) -> float:
    """`factor` until optimizer step `end` (0 from it on)."""
    return factor(step) if step < end else 0.0


#: Per-question answer scores of a result: EM and F1 of RE-RAG's answer and of the retriever-order one.
ANSWER_SCORES = ("em", "f1", "em_retriever_order", "f1_retriever_order")


def generator_spec(shared_base: bool, estimator, generator):
    """The spec the generator is built from: with a shared base the estimator's (its own is unset).
    Takes `ModelSpec`s, or their parsed config groups (the CLI links the datamodule's settings by it)."""
    return estimator if shared_base else generator


def shared_base_models(
    estimator: ModelSpec,
    generator: ModelSpec | None,
    estimator_lora: LoraSpec | None,
    generator_lora: LoraSpec | None,
    freeze_generator: bool,
    tokenizer,
):
    """One base model from `estimator` with adapters "re" and "generator" (or the bare base as a frozen
    generator): (RE model, generator model, RE adapter, generator adapter). `freeze_generator`: the
    generator never trains."""
    if generator is not None and generator != estimator:
        raise ValueError(
            "model.shared_base: the generator is the estimator's base model; set model.generator "
            "to null (or to the estimator's spec)"
        )
    if estimator_lora is None or (generator_lora is None) != freeze_generator:
        raise ValueError(
            "model.shared_base needs model.estimator_lora, and model.generator_lora unless freeze_generator "
            "(the frozen generator is then the base itself)"
        )
    adapters = {"re": estimator_lora} | ({} if freeze_generator else {"generator": generator_lora})
    model = add_adapters(build_model(estimator, tokenizer), adapters)
    return model, model, "re", BASE_ADAPTER if freeze_generator else "generator"


class RERAGModule(L.LightningModule):
    """RE and generator may each be an encoder-decoder or a decoder-only LM (`ModelSpec`).

    LLM-scale switches: `estimator_lora` / `generator_lora` train LoRA adapters only;
    `shared_base` makes the RE and the generator two adapters ("re", "generator") of one frozen
    base built from `estimator` (one copy of its weights; `generator` must be None or the same);
    `freeze_generator` trains the RE alone, taught by L_gen and L_re from the fixed generator's
    likelihoods (with `shared_base`: the base model itself, adapters off, is the generator);
    `gradient_checkpointing` recomputes activations in the backward pass; `compile` (true, or a dict
    of torch.compile arguments) compiles the models' encoder and decoder stacks (`compile_stacks`).

    Ablations of the paper: `marginalize_with="retriever"` trains the generator alone, marginalizing
    with softmax_j of the retriever's scores (Table 6's baseline, RAG without the RE; the RE is not
    trained); `normalize_re=False` trains with s = log p_true instead of eq. 3's log-odds (Table 7);
    `objective="pointwise"` trains the RE alone as MonoT5 is trained, per context on has_answer
    (the pointwise baseline of Tables 2 and 3; the generator never runs).
    The released code's two details: `gen_reduction="sum"` sums L_gen over the batch's questions
    (L_re and L_tok stay means), `re_clamp=1e-5` bounds RE_ij to [1e-5, 1 - 1e-5] before the log-odds.
    `gradient_clip_per_model` clips the RE's and the generator's gradient norms each on its own.
    `teacher_cache_dir` (with `freeze_generator`): the frozen teacher's F_ij of every training pair the
    fit's epochs draw are computed once at fit start and read from disk (`rerag.teacher_cache`);
    `teacher` names another Hugging Face LM as the teacher, read with `teacher_template` (default: the generator's);
    `teacher_question_template` adds the question's likelihood given the context to the teacher's F
    (F = log P_T(q, a | c), not the paper's eq. 8: `rerag.teacher_cache`).
    `teacher_steps` makes that a first stage of a joint run: for its first optimizer steps the
    generator, as it starts (a fresh LoRA adapter is the base itself), teaches the RE alone, from
    the cache when `teacher_cache_dir` is set; then both train (eq. 12), a question template's term,
    cached from the generator as it started, still added to the live F. `train/teacher_margin`
    logs F(gold) - max F(other) by step (when the data has `gold`), to show whether the teacher stays sharp.
    `generator_schedule_from_teacher_steps` runs the generator's learning-rate schedule over the joint
    stage alone: one schedule over the run would have decayed the generator's rate before it trains.
    `generator_steps` puts a stage before a frozen-teacher run: the generator's adapter first learns
    to answer, marginalized with the retriever's scores, then reads at dev and test; the RE's teacher
    is still the base as the run began.

    Evaluation reranks each question's whole list (the datamodule's `n_eval_contexts`) and, for
    every d in `eval_depths`, also only the retriever's first d (metrics `<stage>/top<d>/...`), so
    the paper's top-100 figures and a shallower list's stand side by side."""

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
        freeze_generator: bool = False,
        generator_steps: int = 0,
        teacher_steps: int = 0,
        generator_schedule_from_teacher_steps: bool = False,
        gradient_checkpointing: bool = False,
        compile: CompileSetting = False,
        marginalize_with: Literal["re", "retriever"] = "re",
        objective: Literal["rerag", "pointwise"] = "rerag",
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
            lr_schedule: constant (the paper), or linear or cosine decay to 0 at the run's last step (transformers' schedules).
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
            freeze_generator: train the RE alone against the fixed generator's likelihoods.
            generator_steps: with freeze_generator, a first stage (not in the paper): for this many optimizer steps the generator (its LoRA adapter) trains alone, L_gen marginalized with the retriever's scores (Table 6's baseline), learning to answer; then it stays fixed and reads at dev and test while the RE trains. The RE's teacher stays the base (adapters off). 0: the generator never trains.
            teacher_steps: a first stage: for this many optimizer steps the generator stays as it starts and teaches the RE alone (from the teacher cache with teacher_cache_dir), then both train jointly (eq. 12). 0: joint from the start.
            generator_schedule_from_teacher_steps: the generator's warm-up and decay (lr_schedule, warmup_steps) count from teacher_steps, over the joint stage alone, instead of from step 0 (the RE's still span the run; not in the paper).
            gradient_checkpointing: recompute activations in the backward pass (memory for time).
            compile: torch.compile the models' stacks (true, or a dict of torch.compile arguments).
            marginalize_with: re (the paper) or retriever (Table 6's baseline: the generator alone, weighted by the retriever's scores).
            objective: rerag (eq. 12) or pointwise (the MonoT5-style baseline of Tables 2 and 3: the RE alone, cross-entropy of its "true"/"false" token against each context's has_answer label; the generator is never run).
            normalize_re: eq. 3's log-odds (true) or s = log p_true (Table 7's ablation).
            gen_reduction: L_gen's reduction over a batch's questions: mean, or sum as the released code does.
            re_clamp: clamp RE_ij to [eps, 1 - eps] before the log-odds, as the released code does with 1e-5 (None: off).
            gradient_clip_per_model: clip the RE's and the generator's gradient norms each on its own to trainer.gradient_clip_val.
            teacher_cache_dir: with freeze_generator or teacher_steps > 0, compute the teacher's F_ij of every training pair the fit's epochs draw once and keep them in this folder.
            teacher: any Hugging Face LM as the teacher (None: the frozen generator); needs teacher_cache_dir.
            teacher_tokenizer: the teacher's tokenizer (None: the teacher's name_or_path).
            teacher_template: the teacher's input text (None: generator_template).
            teacher_question_template: a passage without the question, after which the frozen teacher scores the question: F_ij = log P_T(a_i | q_i, c_j) + log P_T(q_i | c_j) (None: the answer alone, eq. 8); after teacher_steps the cached log P_T(q_i | c_j) is added to the live generator's F.
            window_pooling: where data.init_args.eval_context_words cuts dev/test passages into windows, a passage's s from its windows': max (MaxP), mean, or first (FirstP); `rerag export` keeps it.
        """
        super().__init__()
        self.save_hyperparameters()
        for field, minimum in (
            ("val_top_k", 1),
            ("test_top_k", 1),
            ("num_beams", 1),
            ("score_batch_size", 1),
            ("max_answer_length", 1),
            ("alpha_re", 0),
            ("alpha_tok", 0),
            ("alpha_anchor", 0),
            ("teacher_steps", 0),
            ("generator_steps", 0),
            ("warmup_steps", 0),
            ("lr", 0),
            ("weight_decay", 0),
        ):  # checked before any model loads
            if self.hparams[field] < minimum:
                raise ValueError(f"model.{field}: must be at least {minimum}, got {self.hparams[field]}")
        if not teacher_temperature > 0:
            raise ValueError(f"model.teacher_temperature: must be positive, got {teacher_temperature}")
        if re_clamp is not None and not 0 < re_clamp < 0.5:
            raise ValueError(f"model.re_clamp: must be in (0, 0.5) or null, got {re_clamp}")
        for field, hint in get_type_hints(RERAGModule.__init__).items():  # the CLI checks Literals; Python callers too
            allowed = get_args(hint)
            if get_origin(hint) is Literal and self.hparams[field] not in allowed:
                raise ValueError(f"model.{field} must be one of {list(allowed)}, got {self.hparams[field]!r}")
        for field, spec in (("estimator", estimator), ("generator", generator), ("teacher", teacher)):
            if spec is not None:
                spec.check(f"model.{field}")
        if objective == "pointwise" and (marginalize_with == "retriever" or teacher_cache_dir is not None):
            raise ValueError("model.objective: pointwise trains the RE on labels alone: no generator, no teacher")
        if marginalize_with == "retriever" and freeze_generator:
            raise ValueError(
                "model.marginalize_with: retriever trains the generator alone; freeze_generator would train nothing"
            )
        if teacher_cache_dir is None and teacher is not None:
            raise ValueError("model.teacher needs model.teacher_cache_dir: a teacher is only read through its cache")
        if teacher_steps and (freeze_generator or marginalize_with == "retriever" or objective == "pointwise"):
            raise ValueError(
                "model.teacher_steps is a first stage before joint training: it needs a generator that trains"
            )
        if generator_steps and not (freeze_generator and (generator_lora is not None or not shared_base)):
            raise ValueError(
                "model.generator_steps trains the generator before the RE trains against the frozen teacher: it "
                "needs freeze_generator: true (and with shared_base a generator_lora, the adapter that trains)"
            )
        if generator_schedule_from_teacher_steps and not teacher_steps:
            raise ValueError("model.generator_schedule_from_teacher_steps needs model.teacher_steps > 0")
        if teacher_cache_dir is not None and not (freeze_generator or teacher_steps):
            raise ValueError(
                "model.teacher_cache_dir needs freeze_generator: true or teacher_steps > 0 (a trained generator's F changes)"
            )
        if teacher_question_template is not None and teacher_cache_dir is None:
            raise ValueError(
                "model.teacher_question_template is scored once into the teacher cache: it needs teacher_cache_dir "
                "(with freeze_generator: true or teacher_steps > 0)"
            )
        if teacher_question_template is not None and "{question}" in teacher_question_template:
            raise ValueError(
                f"model.teacher_question_template: {teacher_question_template!r} holds {{question}}: the teacher "
                "reads the passage alone and then scores the question"
            )
        re_tok = load_tokenizer(re_tokenizer, estimator.trust_remote_code)
        gen_spec = generator_spec(shared_base, estimator, generator)
        if gen_spec is None:
            raise ValueError("model.generator is needed unless shared_base is true")
        gen_tok = load_tokenizer(generator_tokenizer, gen_spec.trust_remote_code)
        generator_never_trains = freeze_generator and not generator_steps
        if shared_base:
            re_model, gen_model, re_adapter, gen_adapter = shared_base_models(
                estimator, generator, estimator_lora, generator_lora, generator_never_trains, re_tok
            )
        else:  # with a LoraSpec only the adapters train (base weights frozen); None = full fine-tuning
            re_model = add_lora(build_model(estimator, re_tok), estimator_lora)
            gen_model = add_lora(build_model(generator, gen_tok), generator_lora)
            re_adapter = gen_adapter = None
            if generator_never_trains:
                gen_model.requires_grad_(False)
        for model in {id(m): m for m in (re_model, gen_model)}.values():
            if gradient_checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
                if estimator_lora or generator_lora:
                    model.enable_input_require_grads()  # frozen embeddings: checkpointed blocks still get a grad input
        self.estimator = RelevanceEstimator(
            re_model,
            re_tok,
            true_word,
            false_word,
            re_template,
            re_max_length,
            re_adapter,
            window_pooling=window_pooling,
        )
        self.generator = Generator(
            gen_model, gen_tok, max_answer_length, generator_template, generator_max_length, gen_adapter
        )
        compile_stacks(self.estimator, compile)
        if compile:  # a merged copy of compiled stacks would not be the compiled model
            self.estimator.merge_for_scoring = False
        if gen_model is not re_model:  # a shared base is compiled once
            compile_stacks(self.generator, compile)
        self.metrics = torch.nn.ModuleDict(
            {
                key: MetricCollection(
                    {
                        # means of the per-question scores that `_evaluate` puts in each result
                        **{name: MeanMetric() for name in ANSWER_SCORES},
                        **{
                            f"{order}_{relevant}{n}": m
                            for order in ("re", "retriever")
                            for relevant in ("", "gold_")
                            for n, m in recall_at_k(recall_ks).items()
                        },
                    },
                    prefix=prefix,
                    compute_groups=False,
                )  # each metric gets its own inputs
                for stage in ("val", "test")
                for key, prefix in (
                    (stage, f"{stage}/"),
                    *((f"{stage}_top{d}", f"{stage}/top{d}/") for d in eval_depths),
                )
            }
        )
        self.results: dict[str, list[dict]] = {"val": [], "test": []}  # per question, this process's share
        self.teacher_scores: TeacherScores | None = None  # set at fit start with teacher_cache_dir
        self.teacher_cache_key: str | None = None  # its file's name; a resumed run keeps the one it began with
        self.teacher_spec = teacher or gen_spec
        # a prompt's tokens -> its answer and log-likelihood, kept from one validation to the next while
        # the generator cannot change (`keep_or_reset_answers`), and shared within each evaluation epoch
        self.generated: dict[tuple[int, ...], tuple[str, float]] = {}
        self.generated_at_step = -1
        self.checkpoint_step: int | None = None  # the optimizer step of the checkpoint last loaded

    # ---- the frozen teacher's cache ------------------------------------------------------------
    def teacher_generator(self) -> tuple[Generator, dict]:
        """The teacher that scores F_ij for the cache, and what identifies it: the frozen generator
        (the shared base with adapters off, or the generator model; with `generator_steps` its adapters
        off, so the teacher is the one the run began with), or `teacher`, any Hugging Face LM loaded
        here. Either reads `teacher_template` (None: the generator's template)."""
        hp = self.hparams
        template = hp.teacher_template or hp.generator_template
        spec = self.teacher_spec
        if hp.teacher is None:
            g = self.generator
            adapter = BASE_ADAPTER if hp.generator_steps else g.adapter
            teacher = Generator(g.model, g.tokenizer, g.max_answer_length, template, g.max_length, adapter)
            tokenizer_name = hp.generator_tokenizer
        else:
            tokenizer_name = hp.teacher_tokenizer or spec.name_or_path
            tok = load_tokenizer(tokenizer_name, spec.trust_remote_code)
            model = build_model(spec, tok).requires_grad_(False).to(self.device)
            teacher = Generator(model, tok, hp.max_answer_length, template, hp.generator_max_length)
        name = {"model": spec.name_or_path, "tokenizer": tokenizer_name}
        return teacher, name | {"weights": weights_fingerprint(teacher)}

    def on_fit_start(self) -> None:
        """Warn of a stage or warm-up this fit does not reach. With `teacher_cache_dir`: read the
        teacher's F_ij for every training pair the fit's epochs draw (`training_epochs`) from the
        cache, or compute and write them first (rank zero; the other processes wait, then read)."""
        hp = self.hparams
        self.generated, self.generated_at_step = {}, -1  # answers are kept within one fit only
        self.warn_of_unreached_stages()
        if hp.teacher_cache_dir is None:
            return
        data = self.trainer.datamodule
        teacher, identity = self.teacher_generator()
        prompt = {
            "template": teacher.template,
            "max_length": teacher.max_length,
            "max_answer_length": teacher.max_answer_length,
        }
        if hp.teacher_question_template is not None:  # absent when off, so earlier caches keep their key
            prompt |= {"question_template": hp.teacher_question_template, "max_question_tokens": MAX_QUESTION_TOKENS}
        epochs = self.training_epochs()
        settings = data.teacher_triple_settings() | ({} if epochs is None else {"epochs": epochs})
        key = teacher_key(identity | prompt, data.train_file, settings)
        # Resumed: the key the run began with. A generator that trains every weight (not a LoRA
        # adapter, which the key leaves out) has moved since, and its key would rebuild the cache
        # from the trained generator.
        began_with = self.teacher_cache_key or key
        path = Path(hp.teacher_cache_dir) / f"{began_with}.pt"
        if self.trainer.is_global_zero and not path.exists():
            if began_with != key:
                raise FileNotFoundError(
                    f"teacher cache {path}: the run being resumed began with it, and its generator has trained "
                    "since, so it cannot be rebuilt; restore the file or start the run again"
                )
            scores = build_teacher_scores(
                teacher,
                data.teacher_triples(epochs),
                batch_size=hp.score_batch_size,
                key=key,
                question_template=hp.teacher_question_template,
            )
            scores.save(path)
        self.trainer.strategy.barrier("teacher cache")
        self.teacher_scores, self.teacher_cache_key = TeacherScores.load(path), began_with
        del teacher

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

    def stage_ends(self) -> dict[str, int]:
        """The optimizer step at which each first stage ends, named by its setting (none: one stage)."""
        hp = self.hparams
        return {f"model.{name}": hp[name] for name in ("teacher_steps", "generator_steps") if hp[name]}

    def warn_of_unreached_stages(self) -> None:
        """Warn where this fit ends before a stage after the first gets a step, or before a warm-up ends."""
        hp, end = self.hparams, self.trainer.estimated_stepping_batches
        if late := [f"{name} {step}" for name, step in self.stage_ends().items() if step >= end]:
            warnings.warn(f"this fit ends at optimizer step {end}: no step follows {', '.join(late)}", stacklevel=2)
        if hp.warmup_steps:  # the last schedule's warm-up, which starts where its stage does
            start = hp.teacher_steps if hp.generator_schedule_from_teacher_steps else hp.generator_steps
            unreachable(self.trainer, [("the end of model.warmup_steps", start + hp.warmup_steps)])

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if self.teacher_cache_key is not None:
            checkpoint["teacher_cache_key"] = self.teacher_cache_key

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.teacher_cache_key = checkpoint.get("teacher_cache_key")
        self.checkpoint_step = checkpoint.get("global_step")  # the step the loaded weights come from

    # ---- training -------------------------------------------------------------------------
    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        b, k = len(batch["questions"]), int(batch["n_contexts"][0])
        if self.hparams.objective == "pointwise":  # MonoT5: per context, on the label; the generator never runs
            log_p_true, log_p_false = self.estimator.true_false_logprobs(
                batch["re"]["input_ids"], batch["re"]["attention_mask"], backend=self.hparams.kernel_backend
            )
            losses = {"loss": pointwise_relevance(log_p_true, log_p_false, batch["has_answer"])}
            self.log_dict({f"train/{n}": v for n, v in losses.items()}, prog_bar=True, batch_size=b)
            return losses["loss"]
        labels = batch["labels"].repeat_interleave(k, dim=0)
        hp = self.hparams
        generator_stage = self.global_step < hp.generator_steps
        frozen = (hp.freeze_generator and not generator_stage) or self.global_step < hp.teacher_steps
        if self.teacher_scores is not None and frozen:  # the frozen teacher's F, computed once at fit start
            answer_loglik = self.teacher_scores.lookup(batch["questions"], batch["targets"], batch["contexts"])
            answer_loglik = answer_loglik.to(self.device)
        else:
            with torch.set_grad_enabled(not frozen):
                answer_loglik = self.generator.answer_loglik(
                    batch["gen"]["input_ids"], batch["gen"]["attention_mask"], labels
                ).view(b, k)
            if hp.teacher_question_template is not None and not generator_stage:  # after teacher_steps: the
                # first stage's log P(q | c), fixed, plus the live log P_G(a | q, c), so the target keeps its question term
                question_loglik = self.teacher_scores.question_lookup(batch["questions"], batch["contexts"])
                answer_loglik = answer_loglik + question_loglik.to(answer_loglik)
        if hp.marginalize_with == "retriever" or generator_stage:  # RAG without the RE: the RE is not even run
            scores = batch["retriever_scores"].view(b, k).to(answer_loglik.device)
            losses = {"loss_gen": marginal_nll(scores, answer_loglik, hp.gen_reduction)}
            losses["loss"] = losses["loss_gen"]
        else:
            losses = self.relevance_losses(batch, answer_loglik)
        self.log_dict({f"train/{n}": v for n, v in losses.items()}, prog_bar=True, batch_size=b)
        if hp.teacher_steps:
            self.log("train/teacher_stage", float(frozen), batch_size=b)
        if hp.generator_steps:
            self.log("train/generator_stage", float(generator_stage), batch_size=b)
        if "gold" in batch and (margin := teacher_margin(answer_loglik, batch["gold"].view(b, k))) is not None:
            self.log("train/teacher_margin", margin, batch_size=b)
        return losses["loss"]

    def relevance_losses(self, batch: dict, answer_loglik: torch.Tensor) -> dict[str, torch.Tensor]:
        """The RE's forward pass and eq. 12's losses with the module's weights, given the
        generator's F_ij [b, k] (computed in the step, or the frozen teacher's, from its cache)."""
        b, k = answer_loglik.shape
        log_p_true, log_p_false = self.estimator.true_false_logprobs(
            batch["re"]["input_ids"], batch["re"]["attention_mask"], backend=self.hparams.kernel_backend
        )
        return rerag_loss(
            log_p_true.view(b, k),
            log_p_false.view(b, k),
            answer_loglik,
            self.hparams.alpha_re,
            self.hparams.alpha_tok,
            self.hparams.kl_direction,
            self.hparams.alpha_anchor,
            batch["has_answer"].view(b, k),
            self.hparams.normalize_re,
            self.hparams.gen_reduction,
            self.hparams.re_clamp,
            self.hparams.teacher_temperature,
        )

    def estimator_parameters(self) -> list[torch.nn.Parameter]:
        """The trainable parameters of the RE: its own model's, or its adapter's on a shared base."""
        adapter = self.estimator.adapter
        return [
            p
            for name, p in self.estimator.model.named_parameters()
            if p.requires_grad and (adapter is None or f".{adapter}." in name)
        ]

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """`trainer.gradient_clip_val` as Lightning applies it, or with `gradient_clip_per_model` (norm
        clipping) to the RE's and the generator's gradients each on its own: one global norm lets the
        generator's gradient (norm 4.3 at the first step of the SmolLM2 joint run) shrink the RE's step."""
        if not (self.hparams.gradient_clip_per_model and gradient_clip_val) or gradient_clip_algorithm == "value":
            return super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)
        for params in self.parameters_by_model():
            torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], gradient_clip_val)

    def parameters_by_model(self) -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]]:
        """The trainable parameters of the RE, then the generator's (on a shared base: each adapter's)."""
        re_params = self.estimator_parameters()
        ids = {id(p) for p in re_params}
        return re_params, [p for p in self.parameters() if p.requires_grad and id(p) not in ids]

    def configure_optimizers(self):
        # The paper's setup: AdamW, constant learning rate, weight decay 1e-3 (`lr_schedule` may decay it);
        # `estimator_lr` (None: `lr`) gives the RE its own rate, e.g. a LoRA RE that learns slower than the generator.
        hp = self.hparams
        trainable = [p for p in self.parameters() if p.requires_grad]
        if hp.estimator_lr is not None or hp.generator_schedule_from_teacher_steps or hp.generator_steps:
            # else one group, as checkpoints from before the options hold
            re_params, generator_params = self.parameters_by_model()
            re_lr = hp.lr if hp.estimator_lr is None else hp.estimator_lr
            trainable = [
                group
                for group in (
                    {"params": re_params, "lr": re_lr, "name": "estimator"},
                    {"params": generator_params, "name": "generator"},
                )
                if group["params"]
            ]
        optimizer = torch.optim.AdamW(trainable, lr=hp.lr, weight_decay=hp.weight_decay)
        if hp.lr_schedule == "constant" and not hp.warmup_steps:
            return optimizer
        total = self.trainer.estimated_stepping_batches
        factors = []
        for group in optimizer.param_groups:
            generator = group.get("name") == "generator"
            if generator and hp.generator_schedule_from_teacher_steps:
                factors.append(partial(after_step, hp.teacher_steps, schedule_factor(hp, total - hp.teacher_steps)))
            elif generator and hp.generator_steps:  # the generator's stage comes first
                factors.append(partial(before_step, hp.generator_steps, schedule_factor(hp, hp.generator_steps)))
            elif hp.generator_steps:  # then the RE's
                factors.append(partial(after_step, hp.generator_steps, schedule_factor(hp, total - hp.generator_steps)))
            else:
                factors.append(schedule_factor(hp, total))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factors)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # ---- evaluation -----------------------------------------------------------------------
    def relevance_scores(self, batch: dict) -> torch.Tensor:
        """The RE's log-odds s for every flattened (question, context) row, in length-sorted chunks;
        where the batch's RE rows are windows (`data.init_args.eval_context_words`), a context's s is
        its windows' pooled by `window_pooling`. A chunk holds one question's rows, which share
        their prompt's prefix."""
        re_inputs = batch["re"]
        counts = torch.as_tensor(batch["n_contexts"])
        question_of = torch.repeat_interleave(torch.arange(len(counts)), counts.cpu())
        if "re_window_of" in batch:
            question_of = question_of[batch["re_window_of"].cpu()]
        estimator = self.__dict__.get("scoring_estimator") or self.estimator
        s = estimator.score_rows(
            re_inputs["input_ids"], re_inputs["attention_mask"], self.hparams.score_batch_size, question_of
        )
        if "re_window_of" not in batch:
            return s
        return pool_windows(s, batch["re_window_of"], len(batch["retriever_scores"]), estimator.window_pooling)

    def answer(
        self, batch: dict, kept: list[torch.Tensor], weights: torch.Tensor, generated: dict | None = None
    ) -> list[tuple[str, float]]:
        """Generate from each kept context and marginalize with softmax(weights) (eq. 6).
        `generated` (a prompt's tokens -> its answer and log-likelihood) is shared by the calls over
        one batch (and kept longer by `keep_or_reset_answers`): a prompt the RE's and the retriever's
        top k both hold is generated once (greedy or beam search gives it one answer; batched apart,
        bf16 padding could give two)."""
        rows = torch.cat(kept)
        generated = {} if generated is None else generated
        prompts = self.generate_new(batch, rows, generated)
        answers = [generated[p][0] for p in prompts]
        loglik = torch.tensor([generated[p][1] for p in prompts], device=weights.device)
        out, start = [], 0
        for idx in kept:
            end = start + len(idx)
            out.append(marginalize_answers(answers[start:end], weights[idx], loglik[start:end]))
            start = end
        return out

    def generate_new(self, batch: dict, rows: torch.Tensor, generated: dict) -> list[tuple[int, ...]]:
        """Generate, in one call, an answer for each prompt of the flattened `rows` that `generated`
        (a prompt's tokens -> its answer and log-likelihood) lacks, and add it there. Returns the
        rows' prompts."""
        gen = batch["gen"]
        prompts = [
            tuple(ids[mask.bool()].tolist()) for ids, mask in zip(gen["input_ids"][rows], gen["attention_mask"][rows])
        ]
        new = {}  # each prompt not yet generated -> its first row
        for row, prompt in zip(rows.tolist(), prompts):
            if prompt not in generated:
                new.setdefault(prompt, row)
        if new:
            new_rows = torch.tensor(list(new.values()), device=rows.device)
            width = int(gen["attention_mask"][new_rows].sum(dim=1).max())
            texts, logliks = self.generator.generate(
                gen["input_ids"][new_rows, :width], gen["attention_mask"][new_rows, :width], self.hparams.num_beams
            )
            generated.update(zip(new, zip(texts, logliks.tolist())))
        return prompts

    def read(
        self,
        batch: dict,
        top_k: int,
        retriever_baseline: bool = False,
        s: torch.Tensor | None = None,
        generated: dict | None = None,
    ) -> tuple[torch.Tensor, list[dict]]:
        """The one pass over a batch: the RE's log-odds s of every flattened context (unless given),
        and one result per question, keyed by the record's id, with `index` (its dataset-wide
        position): the RE's top-k contexts, the eq. 6 answer over them, confidence = max_j RE_ij;
        with `retriever_baseline`, also `answer_retriever_order` from the retriever's top-k and scores.
        `generated`: the answers already generated for this batch's prompts (`answer`)."""
        generated = {} if generated is None else generated
        counts = batch["n_contexts"]
        s = self.relevance_scores(batch) if s is None else s
        kept = top_k_per_question(s, counts, top_k)
        flat = [c for cs in batch["contexts"] for c in cs]
        results = [
            {
                "id": qid,
                "index": int(index),
                "question": question,
                "answer": answer,
                "answer_logprob": logp,
                "confidence": torch.sigmoid(s[idx].max()).item(),
                "contexts": [{"id": flat[j]["id"], "re_score": s[j].item()} for j in idx.tolist()],
            }
            for qid, index, question, idx, (answer, logp) in zip(
                batch["ids"], batch["index"].tolist(), batch["questions"], kept, self.answer(batch, kept, s, generated)
            )
        ]
        if retriever_baseline:
            by_retriever = [rows.to(s.device) for rows in first_rows(counts, top_k)]
            by_retriever_answers = self.answer(batch, by_retriever, batch["retriever_scores"], generated)
            for result, (answer, _) in zip(results, by_retriever_answers):
                result["answer_retriever_order"] = answer
        return s, results

    def fix_scoring_estimator(self, fixed: bool) -> None:
        """From the start of an evaluation epoch to its end the RE's weights stay fixed, so it scores
        with `RelevanceEstimator.for_scoring` (on a CPU in float32, a copy with its adapter merged);
        the copy is dropped at the end, before training moves the weights. Kept out of the module's
        submodules, so out of checkpoints and `state_dict`."""
        self.__dict__["scoring_estimator"] = self.estimator.for_scoring() if fixed else None

    def keep_or_reset_answers(self) -> None:
        """Within one fit a frozen generator (after `generator_steps`, if any) reads a dev prompt to
        the same answer at every validation, so its answers are kept from one to the next; otherwise,
        and at every test or validate, they are generated afresh."""
        hp = self.hparams
        fitting = self.trainer.state.fn == TrainerFn.FITTING
        if not (fitting and hp.freeze_generator and self.generated_at_step >= hp.generator_steps):
            self.generated, self.generated_at_step = {}, self.global_step

    def on_validation_epoch_start(self) -> None:
        self.results["val"] = []
        self.fix_scoring_estimator(True)
        self.keep_or_reset_answers()

    def on_test_epoch_start(self) -> None:
        self.results["test"] = []
        self.fix_scoring_estimator(True)
        self.keep_or_reset_answers()

    def on_predict_epoch_start(self) -> None:
        self.fix_scoring_estimator(True)

    def on_validation_epoch_end(self) -> None:
        self.fix_scoring_estimator(False)

    def on_test_epoch_end(self) -> None:
        self.fix_scoring_estimator(False)

    def on_predict_epoch_end(self) -> None:
        self.fix_scoring_estimator(False)

    def _evaluate(self, batch: dict, stage: str) -> None:
        """Metrics of one batch over its whole lists (`<stage>/...`) and over the retriever's first d
        contexts of each for every d of `eval_depths` (`<stage>/top<d>/...`: what reranking a
        shallower list gives, from the same RE scores), and per question (in `results[stage]`, whole
        lists only) what paired comparisons of runs need: EM and F1 of both answers, and the rank of
        the first relevant context in the RE's and the retriever's order (`first_hit`; Recall@k is
        rank <= k)."""
        top_k = self.hparams.val_top_k if stage == "val" else self.hparams.test_top_k
        generated = self.generated  # one generation per prompt across the reads below (`keep_or_reset_answers`)
        s, counts = self.relevance_scores(batch), batch["n_contexts"]
        cuts = [(cut, rows.to(s.device)) for cut, rows in (first_contexts(batch, d) for d in self.hparams.eval_depths)]
        # Every prompt the reads below answer from, generated in one call: its decoding loop, which
        # costs a CPU about as much for one prompt as for a dozen, runs once per batch. The retriever's
        # first d contexts hold its top k where d >= k, and lie within them where d < k.
        wanted = [*top_k_per_question(s, counts, top_k), *first_rows(counts.to(s.device), top_k)]
        wanted += [rows[r] for cut, rows in cuts for r in top_k_per_question(s[rows], cut["n_contexts"], top_k)]
        self.generate_new(batch, torch.cat(wanted), generated)
        _, results = self.read(batch, top_k, retriever_baseline=True, s=s, generated=generated)
        self.results[stage] += self._score(batch, s, results, stage)
        for depth, (cut, rows) in zip(self.hparams.eval_depths, cuts):
            _, shallow = self.read(cut, top_k, retriever_baseline=True, s=s[rows], generated=generated)
            self._score(cut, s[rows], shallow, f"{stage}_top{depth}")

    def _score(self, batch: dict, s: torch.Tensor, results: list[dict], metrics_key: str) -> list[dict]:
        """Add EM, F1 and first-hit ranks to `results`, update and log the metrics `metrics_key`."""
        counts = batch["n_contexts"].to(s.device)
        position = -torch.cat([torch.arange(int(n), device=s.device) for n in counts]).float()
        relevance = {name: batch[name].to(s.device) for name in ("has_answer", "gold") if name in batch}
        for result, answers, rows in zip(results, batch["answers"], torch.split(torch.arange(len(s)), counts.tolist())):
            result |= {
                "em": exact_match(result["answer"], answers),
                "f1": token_f1(result["answer"], answers),
                "em_retriever_order": exact_match(result["answer_retriever_order"], answers),
                "f1_retriever_order": token_f1(result["answer_retriever_order"], answers),
                "first_hit": {
                    order: {name: first_hit_rank(scores[rows], rel[rows]) for name, rel in relevance.items()}
                    for order, scores in (("re", s), ("retriever", position))
                },
            }
        # torchmetrics' retrieval metrics group rows by an integer: the question's dataset-wide index.
        indexes = torch.repeat_interleave(batch["index"].to(s.device), counts)
        metrics = self.metrics[metrics_key]
        logged = {}
        for name, metric in metrics.items(keep_base=True):
            if name in ANSWER_SCORES:
                metric.update(torch.tensor([r[name] for r in results], dtype=torch.float64))
            else:
                relevant = relevance.get("gold" if "_gold_" in name else "has_answer")
                if relevant is None:
                    continue  # no gold flags in this data: gold recall is not logged
                metric.update(s if name.startswith("re_") else position, relevant, indexes=indexes)
            logged[f"{metrics.prefix}{name}"] = metric
        self.log_dict(logged, batch_size=len(counts), prog_bar=False)
        return results

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._evaluate(batch, "test")

    def predict_step(self, batch: dict, batch_idx: int) -> list[dict]:
        """One prediction per question: RE top-k, eq. 6 answer, confidence = max_j RE_ij."""
        return self.read(batch, self.hparams.test_top_k)[1]
