"""Which RE prompt and label words rank best before any training? Zero-shot gold Recall@1 per variant.

Builds the module of a fit config once (`configs/squad_smollm2_teacher.yaml` by default: SmolLM2-135M-
Instruct with a fresh LoRA adapter, whose zero update leaves the base model as it is) and, for each
of a few built-in variants (the RE's user message `re_template` and its label words `true_word` /
`false_word`), scores BM25's top `--contexts` passages of the first `--questions` questions of
`--file` with the module's own path: the datamodule's evaluation batches (its collate, the chat
template, `re_max_length`), `RERAGModule.relevance_scores` (s = z_true - z_false at the last prompt
position, by a `RelevanceEstimator` on the same base with the variant's words; a word must be one
token as the first answer token) and `rerag.metrics` (`first_hit_rank`, `hits_at_k`). Prints, per
variant, gold Recall@1 and @5 and has-answer Recall@1 of the RE's order over the top `--contexts`,
BM25's gold Recall@1 (the file's order) on the same questions, the label words' token ids, how many
prompts reached `re_max_length` (their text is cut at the end: the instruction first) and the
seconds the variant took (`--only` picks variants by name). Nothing trains and nothing is written.

    python benchmarks/re_prompt_probe.py --questions 40
    python benchmarks/re_prompt_probe.py --config configs/squad_smollm2.yaml --file data/squad/test.jsonl
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from rerag.data.datamodule import RERAGDataModule
from rerag.fit_config import build_fit
from rerag.metrics import first_hit_rank, hits_at_k
from rerag.models.estimator import RelevanceEstimator, pool_windows

#: The config's own prompt, with "{instruction}" in place of its last line.
QUESTION_FIRST = "Question: {{question}}\nPassage: {{text}}\n{instruction}"
PASSAGE_FIRST = "Passage: {{text}}\nQuestion: {{question}}\n{instruction}"
ANSWERS = "Does the passage answer the question? Answer {true} or {false}."
CONTAINS = "Does the passage contain the answer to the question? Answer {true} or {false}."


def variants(template: str, true_word: str, false_word: str) -> dict[str, tuple[str, str, str]]:
    """Name -> (re_template, true_word, false_word): the config's own first."""

    def prompt(order: str, instruction: str, true: str = "True", false: str = "False") -> str:
        return order.format(instruction=instruction.format(true=true, false=false))

    return {
        "config": (template, true_word, false_word),
        "passage first": (prompt(PASSAGE_FIRST, ANSWERS), "True", "False"),
        "contains the answer": (prompt(QUESTION_FIRST, CONTAINS), "True", "False"),
        "Yes/No": (prompt(QUESTION_FIRST, ANSWERS, "Yes", "No"), "Yes", "No"),
        "config, lowercase words": (template, true_word.lower(), false_word.lower()),
    }


@torch.no_grad()
def probe(module, data: RERAGDataModule, n_questions: int) -> tuple[dict[str, list], int, int]:
    """First-hit ranks of the RE's and the retriever's order over the first `n_questions` of the
    datamodule's evaluation batches (`gold`, `has_answer`), and the rows scored and at the length limit."""
    ranks = {"re_gold": [], "re_has_answer": [], "bm25_gold": []}
    rows = at_limit = 0
    for batch in data.val_dataloader():
        s = module.relevance_scores(batch)
        counts = batch["n_contexts"].tolist()
        lengths = batch["re"]["attention_mask"].sum(dim=1)
        if "re_window_of" in batch:  # the RE read windows: a context's longest one
            lengths = pool_windows(lengths.float(), batch["re_window_of"], len(s)).long()
        for i, (scores, gold, has_answer, length) in enumerate(
            zip(s.split(counts), batch["gold"].split(counts), batch["has_answer"].split(counts), lengths.split(counts))
        ):
            if len(ranks["re_gold"]) == n_questions:
                break
            ranks["re_gold"].append(first_hit_rank(scores, gold))
            ranks["re_has_answer"].append(first_hit_rank(scores, has_answer))
            ranks["bm25_gold"].append(first_hit_rank(-torch.arange(counts[i], dtype=torch.float32), gold))
            rows += counts[i]
            at_limit += int((length >= data.hparams.re_max_length).sum())
        if len(ranks["re_gold"]) == n_questions:
            break
    return ranks, rows, at_limit


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=Path("configs/squad_smollm2_teacher.yaml"))
    p.add_argument("--file", type=Path, default=Path("data/squad/dev.jsonl"), help="FiD file with `gold` flags")
    p.add_argument("--questions", type=int, default=40, help="the file's first N questions")
    p.add_argument("--contexts", type=int, default=20, help="BM25's top N contexts per question")
    p.add_argument("--only", default=None, help="comma-separated variant names (default: all)")
    args = p.parse_args()
    torch.manual_seed(0)
    start = time.perf_counter()
    cli = build_fit(
        ["--config", str(args.config), "--trainer.logger", "false", "--trainer.callbacks", "[]"]
        + ["--trainer.enable_checkpointing", "false"]
    )
    module = cli.model.eval()
    print(f"module built in {time.perf_counter() - start:.0f} s", flush=True)
    base = {k: v for k, v in cli.datamodule.hparams.items() if not k.startswith("_")}  # not _class_path
    base |= {"val_file": str(args.file), "n_eval_contexts": args.contexts}
    data = RERAGDataModule(**base)
    data.setup("validate")  # tokenizers and records once; the collate reads `re_template` from hparams per batch
    own = module.estimator
    chosen = variants(own.template, module.hparams.true_word, module.hparams.false_word)
    if args.only:
        chosen = {name: chosen[name] for name in args.only.split(",")}
    spec = module.hparams.estimator
    model_name = spec["name_or_path"] if isinstance(spec, dict) else spec.name_or_path
    print("\nvariants (re_template):")
    for name, (template, _, _) in chosen.items():
        print(f"- {name}: {template!r}")
    print(
        f"\nZero-shot RE, {args.config.name} ({model_name}, untrained adapter): the first {args.questions} "
        f"questions of {args.file}, BM25's top {args.contexts} each, {torch.get_num_threads()} threads; "
        "rows print as each variant ends\n"
    )
    print(
        "| variant | label words (token ids) | RE gold R@1 | RE gold R@5 | RE has_answer R@1 | BM25 gold R@1 "
        "| prompts at re_max_length | s |"
    )
    print("|---|---|---|---|---|---|---|---|", flush=True)
    ranks = {"re_gold": []}
    for name, (template, true_word, false_word) in chosen.items():
        tick = time.perf_counter()
        try:  # the same model and adapter; the words' ids are checked and looked up as the module does
            module.estimator = RelevanceEstimator(
                own.model, own.tokenizer, true_word, false_word, template, own.max_length, own.adapter
            )
        except ValueError as error:
            print(f"| {name} | {true_word!r}/{false_word!r}: {error} | | | | | | |", flush=True)
            continue
        data.hparams.re_template = template
        ranks, rows, at_limit = probe(module, data, args.questions)
        est = module.estimator
        print(
            f"| {name} | {true_word!r}/{false_word!r} ({est.true_id}/{est.false_id}) "
            f"| {hits_at_k(ranks['re_gold'], 1).mean():.3f} | {hits_at_k(ranks['re_gold'], 5).mean():.3f} "
            f"| {hits_at_k(ranks['re_has_answer'], 1).mean():.3f} | {hits_at_k(ranks['bm25_gold'], 1).mean():.3f} "
            f"| {at_limit}/{rows} | {time.perf_counter() - tick:.0f} |",
            flush=True,
        )
    module.estimator = own
    print(f"\n{len(ranks['re_gold'])} questions scored, {time.perf_counter() - start:.0f} s in all")
    print("command: OMP_NUM_THREADS=" + str(torch.get_num_threads()) + " python " + " ".join(sys.argv))


if __name__ == "__main__":
    main()
