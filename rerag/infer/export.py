"""Export a trained RE-RAG checkpoint as Hugging Face folders, usable without Lightning.

`OUT/estimator`: the RE's weights (safetensors), tokenizer and `rerag_estimator.json` (the
true/false words, the input template, the input length, the window it scores passages by);
`RelevanceEstimator.from_pretrained` loads it and scores exactly as the trained module's RE.
`OUT/generator`: the same for the generator with `rerag_generator.json`; `Generator.from_pretrained`
loads it.

LoRA adapters are merged into the weights by default; `adapters_only` writes the adapters alone,
which needs base models loaded from a name or path (the adapter folder names its base). When the
RE and the generator are two adapters of one shared base, each folder gets its own adapter (merged:
a copy of the base with that adapter folded in; a frozen base generator: the base alone).
Nothing runs code from a file: checkpoints load with `weights_only=True`, weights are safetensors.
"""

from __future__ import annotations

from pathlib import Path

from peft import PeftModel

from erag.lm import BASE_ADAPTER
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.models.lora import merged
from rerag.module import RERAGModule, check_checkpoint_version


def load_checkpoint(path: str | Path, map_location: str = "cpu") -> tuple[RelevanceEstimator, Generator]:
    """The RE and the generator of a Lightning checkpoint, in eval mode (weights_only loading); the
    RE scores passages as the run evaluated them (its `data.init_args.eval_context_words`)."""
    import torch

    saved = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    check_checkpoint_version(saved, path)
    module = RERAGModule.load_from_checkpoint(path, map_location=map_location, weights_only=True)
    data = saved.get("datamodule_hyper_parameters", {})
    module.estimator.context_words = data.get("eval_context_words")
    return module.estimator.eval(), module.generator.eval()


def export(
    estimator: RelevanceEstimator, generator: Generator, out_dir: str | Path, adapters_only: bool = False
) -> dict[str, Path]:
    """Write `out_dir/estimator` and `out_dir/generator`; returns the folders.

    Merging folds the adapters into the given models in place (a shared base is copied first).
    With `adapters_only`, a model without adapters is written whole."""
    out = {name: Path(out_dir) / name for name in ("estimator", "generator")}
    shared = estimator.model is generator.model
    for name, part in (("estimator", estimator), ("generator", generator)):
        if adapters_only and isinstance(part.model, PeftModel) and part.adapter != BASE_ADAPTER:
            adapter = part.adapter or part.model.active_adapter
            if not part.model.peft_config[adapter].base_model_name_or_path:
                raise ValueError(
                    f"--adapters_only: the {name} was built from a config, not loaded from a name or "
                    "path, so its adapters have no base model to load; export it merged"
                )
        else:
            part.model, part.adapter = merged(part.model, part.adapter, shared), None
        part.save_pretrained(out[name])
    return out


def export_checkpoint(
    checkpoint: str | Path,
    out_dir: str | Path,
    adapters_only: bool = False,
    metrics: str | Path | None = None,
    serving: list[str] | None = None,
    whole_passage_metrics: str | Path | None = None,
) -> dict[str, Path]:
    """`export` of a `rerag fit` checkpoint, then its `serving` formats (`rerag.infer.serving`; None:
    every one the RE can take, none with `adapters_only`), with a model card (`README.md`) in the
    RE's folder: the base model, the run's settings and data, its test metrics from `metrics`
    (default: the `test_metrics.json` beside the checkpoint's folder, where the shipped configs
    write it), those of whole passages where the RE scores windows (`whole_passage_metrics`), and how
    to score with each format written."""
    import json

    import torch

    from rerag.infer.model_card import estimator_card, write_card
    from rerag.infer.serving import export_serving

    # the settings only: mmap reads no weights here (load_checkpoint reads them once, below)
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    hparams, data = dict(saved.get("hyper_parameters", {})), dict(saved.get("datamodule_hyper_parameters", {}))
    estimator, generator = load_checkpoint(checkpoint)
    folders = export(estimator, generator, out_dir, adapters_only)
    served = export_serving(estimator, out_dir, [] if adapters_only and serving is None else serving)
    folders |= {fmt: path for fmt, path in served.items() if fmt != "cross_encoder"}
    metrics = Path(metrics) if metrics else Path(checkpoint).resolve().parent.parent / "test_metrics.json"
    measured = json.loads(metrics.read_text()) if metrics.is_file() else None
    spec = hparams.get("estimator")
    base = getattr(spec, "name_or_path", None) or (spec.get("name_or_path") if isinstance(spec, dict) else None)
    whole = json.loads(Path(whole_passage_metrics).read_text()) if whole_passage_metrics else None
    card = estimator_card(estimator, base, hparams, data, measured, saved.get("global_step"), list(served), whole)
    folders["model_card"] = write_card(folders["estimator"], card)
    return folders
