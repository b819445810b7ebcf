"""Export a trained RE-RAG checkpoint as Hugging Face folders, usable without Lightning.

`OUT/estimator`: the RE's weights (safetensors), tokenizer and `rerag_estimator.json` (the
true/false words, the input template, the input length); `RelevanceEstimator.from_pretrained`
loads it and scores exactly as the trained module's RE. `OUT/generator`: the same for the
generator with `rerag_generator.json`; `Generator.from_pretrained` loads it.

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
from rerag.module import RERAGModule


def load_checkpoint(path: str | Path, map_location: str = "cpu") -> tuple[RelevanceEstimator, Generator]:
    """The RE and the generator of a Lightning checkpoint, in eval mode (weights_only loading)."""
    module = RERAGModule.load_from_checkpoint(path, map_location=map_location, weights_only=True)
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
                    f"--adapters-only: the {name} was built from a config, not loaded from a name or "
                    "path, so its adapters have no base model to load; export it merged"
                )
        else:
            part.model, part.adapter = merged(part.model, part.adapter, shared), None
        part.save_pretrained(out[name])
    return out
