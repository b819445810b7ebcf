"""The serving formats of a trained decoder-only RE against rerag's own scoring: equal scores, and speed.

    rerag export --checkpoint outputs/squad_smollm2/checkpoints/final.ckpt --out outputs/squad_smollm2/export
    python benchmarks/serving_formats.py --export outputs/squad_smollm2/export --data data/squad/test.jsonl

Pairs are each test question with its FiD contexts, in file order, whole passages (a server scores
whole passages: the RE's `context_words` windows are turned off here for the like-for-like check).
Every system runs in float32 on the same pairs:
- rerag: `RelevanceEstimator.predict` (two LM-head rows, a shared prompt prefix read once on a CPU);
- the CrossEncoder: sentence-transformers' `CrossEncoder(export/estimator)` with the identity activation;
- the sequence classifier: `AutoModelForSequenceClassification(export/sequence_classification)` over the
  pair chat template's prompts, right-padded in batches.
The table gives max |s_format - s_rerag| over the first `--equal-pairs` pairs, the share of questions
whose top passage agrees, and pairs per second over `--pairs` pairs (the fastest of `--repeats` passes).
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import torch

from rerag.data.fid_format import read_fid
from rerag.models.estimator import RelevanceEstimator


def question_pairs(path: Path, n: int) -> tuple[list[tuple[str, str]], list[int]]:
    """The first `n` (question, passage text) pairs of the file and the question index of each."""
    pairs, owner = [], []
    for i, record in enumerate(read_fid(path, require_answers=False)):
        for ctx in record["ctxs"]:
            pairs.append((record["question"], ctx["text"]))
            owner.append(i)
    return pairs[:n], owner[:n]


def sequence_classifier(folder: Path, batch_size: int):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).eval()

    @torch.no_grad()
    def predict(pairs: list[tuple[str, str]]) -> torch.Tensor:
        texts = [
            tok.apply_chat_template(
                [{"role": "query", "content": q}, {"role": "document", "content": d}], tokenize=False
            )
            for q, d in pairs
        ]
        out = []
        for start in range(0, len(texts), batch_size):
            enc = tok(texts[start : start + batch_size], add_special_tokens=False, padding=True, return_tensors="pt")
            out.append(model(**enc).logits[:, 0].float())
        return torch.cat(out)

    return predict


def top1_agreement(a: torch.Tensor, b: torch.Tensor, owner: list[int]) -> float:
    owner_t = torch.tensor(owner)
    questions = sorted(set(owner))
    same = [int(torch.argmax(a[owner_t == q])) == int(torch.argmax(b[owner_t == q])) for q in questions]
    return sum(same) / len(same)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", type=Path, required=True, help="a `rerag export` folder of a decoder-only RE")
    parser.add_argument(
        "--data", type=Path, required=True, help="a FiD file whose questions and contexts make the pairs"
    )
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--equal-pairs", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    estimator = RelevanceEstimator.from_pretrained(args.export / "estimator", context_words=None, max_length=4096)
    cross_encoder = CrossEncoder(str(args.export / "estimator"), activation_fn=torch.nn.Identity())
    systems = {
        "rerag predict": lambda p: estimator.predict(p, args.batch_size),
        "CrossEncoder": lambda p: torch.as_tensor(cross_encoder.predict(p, batch_size=args.batch_size)),
        "sequence classifier": sequence_classifier(args.export / "sequence_classification", args.batch_size),
    }
    pairs, owner = question_pairs(args.data, args.pairs)
    few, few_owner = pairs[: args.equal_pairs], owner[: args.equal_pairs]
    reference = systems["rerag predict"](few)
    seconds = {name: float("inf") for name in systems}
    rows = []
    for name, predict in systems.items():
        got = predict(few)
        rows.append((name, float((got - reference).abs().max()), top1_agreement(got, reference, few_owner)))
    for _, (name, predict) in itertools.product(range(args.repeats), systems.items()):
        start = time.perf_counter()
        predict(pairs)
        seconds[name] = min(seconds[name], time.perf_counter() - start)
    print(
        f"{len(pairs)} pairs ({len(set(owner))} questions), float32, batch {args.batch_size}, {torch.get_num_threads()} threads"
    )
    print(f"| system | max abs diff from rerag ({len(few)} pairs) | same top 1 | pairs/s | vs rerag |")
    print("|---|---|---|---|---|")
    for name, diff, agree in rows:
        rate = len(pairs) / seconds[name]
        print(f"| {name} | {diff:.2e} | {agree:.3f} | {rate:.1f} | {seconds['rerag predict'] / seconds[name]:.2f}x |")


if __name__ == "__main__":
    main()
