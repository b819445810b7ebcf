"""RE-RAG: a relevance estimator trained jointly with the answer generator (Kim & Lee, 2024)."""

import importlib

from rerag.defaults import VERSION as __version__  # noqa: F401 (the package's version)

# The public names load on first access (PEP 562), not at `import rerag`, which imports no torch
# (so `rerag --help` starts fast): the datamodule pulls in `datasets` and the module Lightning and
# PEFT, and code that needs only the models or the losses (the GPU benchmarks, on machines without
# `datasets`) must import without them. `rerag.models` registers the shipped reader's model type.
_LAZY = {
    "AssemblySpec": "rerag.assembly",
    "EvaluationSpec": "rerag.evaluation",
    "Generator": "rerag.models.generator",
    "InputSpec": "rerag.inputs",
    "LoraSpec": "rerag.models.lora",
    "LossSpec": "rerag.losses",
    "ModelSpec": "rerag.models.loading",
    "OptimizerSpec": "rerag.optimization",
    "RERAGDataModule": "rerag.data.datamodule",
    "RERAGModule": "rerag.module",
    "RelevanceEstimator": "rerag.models.estimator",
    "Stage": "rerag.stages",
    "TeacherSpec": "rerag.teacher_cache",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'rerag' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
