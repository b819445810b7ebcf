"""RE-RAG: a relevance estimator trained jointly with the answer generator (Kim & Lee, 2024)."""
import rerag.demo.pointer_generator  # noqa: F401  (registers model type `pointer_t5`, the shipped reader's)
from rerag.data.datamodule import RERAGDataModule
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec
from rerag.module import RERAGModule

__all__ = ["Generator", "ModelSpec", "RERAGDataModule", "RERAGModule", "RelevanceEstimator"]
