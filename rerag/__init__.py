"""RE-RAG: a relevance estimator trained jointly with the answer generator (Kim & Lee, 2024)."""
from rerag.data.datamodule import RERAGDataModule
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec
from rerag.module import RERAGModule

__all__ = ["Generator", "ModelSpec", "RERAGDataModule", "RERAGModule", "RelevanceEstimator"]
