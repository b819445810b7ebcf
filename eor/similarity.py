"""Answer-similarity metrics sim_k(y_m, y_n) of eq. 6 and the cached [Q, R, R, M] tensor.

Every metric is a callable on two aligned lists of answers returning one score per pair, with
a `name` (the key of its weight in `VoterWeights`) and `symmetric` (sim(a, b) == sim(b, a), so
`similarity_tensor` scores each unordered pair once).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from eor.encoder import Encoder
from erag.answers import exact_match, token_f1


class Similarity(Protocol):
    name: str
    symmetric: bool

    def __call__(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray: ...


class ExactMatch:
    name, symmetric = "em", True

    def __call__(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        return np.array([exact_match(x, [y]) for x, y in zip(a, b)], dtype=np.float32)


class TokenF1:
    name, symmetric = "f1", True

    def __call__(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        return np.array([token_f1(x, [y]) for x, y in zip(a, b)], dtype=np.float32)


class BERTScore:
    """BERTScore F1 (Zhang et al., 2020) through torchmetrics, with any local HF encoder.

    `num_layers` picks the hidden layer (None: the last), as in torchmetrics.
    """

    name, symmetric = "bertscore", True

    def __init__(
        self, path: str | Path, num_layers: int | None = None, batch_size: int = 64, device: str | None = None
    ):
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()
        self.num_layers, self.batch_size = num_layers, batch_size
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")

    def __call__(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        from torchmetrics.functional.text.bert import bert_score

        if not a:
            return np.zeros(0, np.float32)
        scores = bert_score(
            list(a),
            list(b),
            model=self.model,
            user_tokenizer=self.tokenizer,
            num_layers=self.num_layers,
            batch_size=self.batch_size,
            device=self.device,
            truncation=True,
        )
        return np.asarray(scores["f1"], dtype=np.float32).reshape(-1)


class EmbeddingSimilarity:
    """Cosine similarity of answer embeddings from an `Encoder` (e.g. a sentence-transformers path)."""

    name, symmetric = "embedding", True

    def __init__(self, path: str | Path, **encoder_options):
        self.encoder = Encoder(path, normalize=True, **encoder_options)

    def __call__(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        texts = sorted(set(a) | set(b))
        vectors = dict(zip(texts, self.encoder.encode(texts))) if texts else {}
        return np.array([float(vectors[x] @ vectors[y]) for x, y in zip(a, b)], dtype=np.float32)


class NLIEntailment:
    """Entailment probability from any HF sequence-classification NLI model.

    sim(y_m, y_n) = P(entailment | premise = y_n, hypothesis = y_m): how much another retriever's
    answer supports the candidate. The entailment class is the label whose name starts with
    "entail" unless `entailment_index` is given.
    """

    name, symmetric = "nli", False

    def __init__(
        self, path: str | Path, entailment_index: int | None = None, batch_size: int = 64, device: str | None = None
    ):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = AutoModelForSequenceClassification.from_pretrained(path).to(self.device).eval()
        if entailment_index is None:
            labels = [i for i, label in self.model.config.id2label.items() if str(label).lower().startswith("entail")]
            if len(labels) != 1:
                raise ValueError(
                    f"{path}: no single 'entailment' label in {self.model.config.id2label}; pass entailment_index"
                )
            entailment_index = int(labels[0])
        self.entailment_index, self.batch_size = entailment_index, batch_size

    @torch.inference_mode()
    def __call__(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        probabilities = []
        for start in range(0, len(a), self.batch_size):
            batch = self.tokenizer(
                list(b[start : start + self.batch_size]),
                list(a[start : start + self.batch_size]),
                padding=True,
                truncation=True,
                return_tensors="pt",
            ).to(self.device)
            logits = self.model(**batch).logits.float()
            probabilities.append(logits.softmax(-1)[:, self.entailment_index].cpu().numpy())
        return np.concatenate(probabilities) if probabilities else np.zeros(0, np.float32)


def build_metric(spec: str) -> Similarity:
    """A metric from a config string: "em", "f1", "bertscore:PATH", "embedding:PATH" or "nli:PATH"."""
    kind, _, path = spec.partition(":")
    simple = {"em": ExactMatch, "f1": TokenF1}
    with_model = {"bertscore": BERTScore, "embedding": EmbeddingSimilarity, "nli": NLIEntailment}
    if kind in simple and not path:
        return simple[kind]()
    if kind in with_model and path:
        return with_model[kind](path)
    raise ValueError(f"metric spec {spec!r} must be 'em', 'f1', 'bertscore:PATH', 'embedding:PATH' or 'nli:PATH'")


def similarity_tensor(answers: Sequence[Sequence[str]], metrics: Sequence[Similarity]) -> torch.Tensor:
    """All pairwise similarities sim_k(y_m, y_n) for answers [R][Q]: a float32 [Q, R, R, M] tensor.

    Entry [q, m, n, k] is metric k between retriever m's and retriever n's answers to question q;
    the diagonal m == n is unused by the voter and left at zero. Each metric sees every distinct
    (unordered, when symmetric) answer pair once. Computed once, the tensor makes every voter
    evaluation during the weight search (section 4.2) a tensor operation.
    """
    num_retrievers, num_questions = len(answers), len(answers[0]) if answers else 0
    if any(len(row) != num_questions for row in answers):
        raise ValueError("every retriever needs one answer per question")
    off_diagonal = ~torch.eye(num_retrievers, dtype=torch.bool).expand(num_questions, -1, -1)
    result = torch.zeros(num_questions, num_retrievers, num_retrievers, len(metrics))
    for k, metric in enumerate(metrics):
        pairs: dict[tuple[str, str], int] = {}
        slots = []
        for q in range(num_questions):
            for m in range(num_retrievers):
                for n in range(num_retrievers):
                    if m != n:
                        a, b = answers[m][q], answers[n][q]
                        key = (b, a) if metric.symmetric and b < a else (a, b)
                        slots.append(pairs.setdefault(key, len(pairs)))
        values = torch.as_tensor(np.asarray(metric([a for a, _ in pairs], [b for _, b in pairs]), dtype=np.float32))
        if values.shape != (len(pairs),):
            raise ValueError(f"metric {metric.name} returned shape {tuple(values.shape)} for {len(pairs)} pairs")
        result[..., k][off_diagonal] = values[torch.as_tensor(slots, dtype=torch.long)]
    return result
