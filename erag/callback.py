"""``ERAGCallback``: eRAG (§2) as a Lightning validation metric, logged as ``erag/<metric>``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import lightning.pytorch as pl
import torch

from .contracts import ExpectedOutputs, Reader, RetrievalResults
from .downstream import DownstreamMetric
from .evaluate import evaluate
from .retrieval_metrics import parse_metric

RankingFn = Callable[["pl.Trainer", "pl.LightningModule"], tuple[RetrievalResults, ExpectedOutputs]]


class ERAGCallback(pl.Callback):
    """Run ``erag.evaluate`` at the end of every ``every_n_epochs``-th validation epoch.

    Args:
        ranking: where the validation queries' ranked documents come from: a function
            ``(trainer, pl_module) -> (retrieval_results, expected_outputs)``, or the name of a
            ``pl_module`` attribute holding that pair (or a method returning it, called without
            arguments).
        reader: the reader to annotate with; give either this or ``reader_fn``.
        reader_fn: ``(pl_module) -> reader``, called each time, e.g. to wrap the module's generator.
        metrics, downstream_metric, batch_size, relevance_threshold: as in ``erag.evaluate``.
        every_n_epochs: evaluate after validation epochs n, 2n, ... (skipped in sanity checking).

    Every rank evaluates what ``ranking`` returns on it and the values are logged with
    ``sync_dist=True``: when ``ranking`` returns each rank's own shard of queries, the logged value
    is the mean over ranks (the mean over queries when shards have equal sizes). The last full
    result is kept in ``last_result``.
    """

    def __init__(
        self,
        ranking: RankingFn | str,
        reader: Reader | None = None,
        reader_fn: Callable[[pl.LightningModule], Reader] | None = None,
        metrics: Sequence[str] = ("P@5", "R@5", "MAP", "MRR", "NDCG@10", "Hit@5"),
        downstream_metric: str | DownstreamMetric = "em",
        every_n_epochs: int = 1,
        batch_size: int = 32,
        relevance_threshold: float | None = None,
    ):
        if (reader is None) == (reader_fn is None):
            raise ValueError("give exactly one of reader and reader_fn")
        if every_n_epochs < 1:
            raise ValueError(f"every_n_epochs must be >= 1, got {every_n_epochs}")
        for name in metrics:
            parse_metric(name)
        self.ranking = ranking
        self.reader = reader
        self.reader_fn = reader_fn
        self.metrics = list(metrics)
        self.downstream_metric = downstream_metric
        self.every_n_epochs = every_n_epochs
        self.batch_size = batch_size
        self.relevance_threshold = relevance_threshold
        self.last_result: dict | None = None

    def _rankings(self, trainer: pl.Trainer, pl_module: pl.LightningModule):
        if not isinstance(self.ranking, str):
            return self.ranking(trainer, pl_module)
        value = getattr(pl_module, self.ranking)
        return value() if callable(value) else value

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or (trainer.current_epoch + 1) % self.every_n_epochs:
            return
        retrieval_results, expected_outputs = self._rankings(trainer, pl_module)
        reader = self.reader if self.reader is not None else self.reader_fn(pl_module)
        with torch.no_grad():
            self.last_result = evaluate(
                retrieval_results,
                expected_outputs,
                reader,
                self.downstream_metric,
                self.metrics,
                batch_size=self.batch_size,
                relevance_threshold=self.relevance_threshold,
            )
        for name, value in self.last_result["aggregated"].items():
            pl_module.log(f"erag/{name}", value, sync_dist=True)
