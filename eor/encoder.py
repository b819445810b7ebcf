"""Text encoders loaded from a local path: a sentence-transformers folder or any HF encoder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch


class Encoder:
    """Embeds texts into float32 vectors.

    A folder holding `modules.json` loads as a sentence-transformers model (its own pooling and
    normalization modules apply, plus `normalize` if set). Any other Hugging Face encoder loads with
    `AutoModel`, pooled by the attention-masked mean of its last hidden states (`pooling="mean"`) or
    its first token (`pooling="cls"`, as DPR), then L2-normalized when `normalize` is set (inner
    product = cosine).
    """

    def __init__(
        self,
        path: str | Path,
        pooling: Literal["mean", "cls"] = "mean",
        normalize: bool = True,
        max_length: int = 256,
        batch_size: int = 32,
        device: str | None = None,
    ):
        if pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        self.path = Path(path)
        self.pooling = pooling
        self.normalize = normalize
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if (self.path / "modules.json").exists():
            from sentence_transformers import SentenceTransformer

            self.sentence_transformer = SentenceTransformer(str(self.path), device=self.device)
        else:
            from transformers import AutoModel, AutoTokenizer

            self.sentence_transformer = None
            self.tokenizer = AutoTokenizer.from_pretrained(self.path)
            self.model = AutoModel.from_pretrained(self.path).to(self.device).eval()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return a [len(texts), dim] float32 array."""
        if self.sentence_transformer is not None:
            return self.sentence_transformer.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
                show_progress_bar=False,
            ).astype(np.float32)
        chunks = [self._encode_batch(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(chunks) if chunks else np.zeros((0, self.model.config.hidden_size), np.float32)

    @torch.inference_mode()
    def _encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        batch = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(self.device)
        hidden = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        if self.pooling == "cls":
            vectors = hidden[:, 0]
        else:
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vectors = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        if self.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors.float().cpu().numpy()
