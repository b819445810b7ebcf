"""The RE and the generator a fit trains, built from their specs: separate models, or two LoRA adapters
("re", "generator") of one shared base; LoRA or full fine-tuning; gradient checkpointing; torch.compile."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from erag.lm import BASE_ADAPTER, load_tokenizer
from rerag.inputs import InputSpec
from rerag.models.compilation import CompileSetting, compile_stacks
from rerag.models.estimator import RelevanceEstimator, WindowPooling
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, build_model
from rerag.models.lora import LoraSpec, add_adapters, add_lora


@dataclass(frozen=True)
class AssemblySpec:
    """How the RE and the generator are built and run (`model.assembly`).

    Args:
        estimator_lora: LoRA adapters for the RE (None: full fine-tuning).
        generator_lora: LoRA adapters for the generator (None: full fine-tuning, or none when no stage
            trains it).
        shared_base: the RE and the generator as two adapters ("re", "generator") of one frozen base.
        gradient_checkpointing: recompute activations in the backward pass (memory for time).
        compile: torch.compile the models' stacks (true, or a dict of torch.compile arguments).
        kernel_backend: the true/false log-prob kernel in training: None (Triton on CUDA, else the
            reference), triton or reference.
    """

    estimator_lora: LoraSpec | None = None
    generator_lora: LoraSpec | None = None
    shared_base: bool = False
    gradient_checkpointing: bool = False
    compile: CompileSetting = False
    kernel_backend: Literal["triton", "reference"] | None = None


torch.serialization.add_safe_globals([AssemblySpec])  # checkpoints' hyperparameters hold it


def generator_spec(shared_base: bool, estimator, generator):
    """The spec the generator is built from: with a shared base the estimator's (its own is unset).
    Takes `ModelSpec`s, or their parsed config groups (the CLI links the datamodule's settings by it)."""
    return estimator if shared_base else generator


def shared_base_models(
    estimator: ModelSpec,
    generator: ModelSpec | None,
    estimator_lora: LoraSpec | None,
    generator_lora: LoraSpec | None,
    generator_never_trains: bool,
    tokenizer,
):
    """One base model from `estimator` with adapters "re" and "generator" (or the bare base as a frozen
    generator): (RE model, generator model, RE adapter, generator adapter)."""
    if generator is not None and generator != estimator:
        raise ValueError(
            "model.assembly.shared_base: the generator is the estimator's base model; set model.generator "
            "to null (or to the estimator's spec)"
        )
    if estimator_lora is None or (generator_lora is None) != generator_never_trains:
        raise ValueError(
            "model.assembly.shared_base needs model.assembly.estimator_lora, and model.assembly.generator_lora "
            "unless no stage trains the generator (the frozen generator is then the base itself)"
        )
    adapters = {"re": estimator_lora} | ({} if generator_never_trains else {"generator": generator_lora})
    model = add_adapters(build_model(estimator, tokenizer), adapters)
    return model, model, "re", BASE_ADAPTER if generator_never_trains else "generator"


def build_models(
    estimator: ModelSpec,
    generator: ModelSpec | None,
    inputs: InputSpec,
    assembly: AssemblySpec,
    *,
    window_pooling: WindowPooling,
    generator_never_trains: bool,
) -> tuple[RelevanceEstimator, Generator]:
    """The RE and the generator from their specs, reading `inputs`' text, built as `assembly` says. A
    generator that never trains is frozen: its weights out of the gradient, or on a shared base the
    base itself, adapters off."""
    a = assembly
    re_tok = load_tokenizer(inputs.re_tokenizer, estimator.trust_remote_code)
    gen_spec = generator_spec(a.shared_base, estimator, generator)
    if gen_spec is None:
        raise ValueError("model.generator is needed unless model.assembly.shared_base is true")
    gen_tok = load_tokenizer(inputs.generator_tokenizer, gen_spec.trust_remote_code)
    if a.shared_base:
        re_model, gen_model, re_adapter, gen_adapter = shared_base_models(
            estimator, generator, a.estimator_lora, a.generator_lora, generator_never_trains, re_tok
        )
    else:  # with a LoraSpec only the adapters train (base weights frozen); None = full fine-tuning
        re_model = add_lora(build_model(estimator, re_tok), a.estimator_lora)
        gen_model = add_lora(build_model(generator, gen_tok), a.generator_lora)
        re_adapter = gen_adapter = None
        if generator_never_trains:
            gen_model.requires_grad_(False)
    for model in {id(m): m for m in (re_model, gen_model)}.values():
        if a.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if a.estimator_lora or a.generator_lora:
                model.enable_input_require_grads()  # frozen embeddings: checkpointed blocks still get a grad input
    re = RelevanceEstimator(
        re_model,
        re_tok,
        inputs.true_word,
        inputs.false_word,
        inputs.re_template,
        inputs.re_max_length,
        re_adapter,
        window_pooling=window_pooling,
    )
    gen = Generator(
        gen_model,
        gen_tok,
        inputs.max_answer_length,
        inputs.generator_template,
        inputs.generator_max_length,
        gen_adapter,
    )
    compile_stacks(re, a.compile)
    if a.compile:  # a merged copy of compiled stacks would not be the compiled model
        re.merge_for_scoring = False
    if gen_model is not re_model:  # a shared base is compiled once
        compile_stacks(gen, a.compile)
    return re, gen
