"""How well does the frozen teacher itself rank a test article? Its order of BM25's top contexts by
F_ij = log P_G(a_i | q_i, c_ij) (eq. 8), the answer likelihood the RE is distilled from (eq. 9-10),
and by F_ij + log P_G(q_i | c_ij), the question-and-answer teacher of `model.teacher_question_template`
(`rerag.teacher_cache`), the question read after `--question-template`.

The teacher reads the gold answer, so its order is no ranker a user could run: it is what L_re pulls
the RE towards, the ranking a perfect student of this teacher would reproduce. Builds the fit
config's module (`configs/squad_smollm2_teacher.yaml` by default), takes its teacher as the fit
would (`RERAGModule.teacher_generator`: the frozen base, or `model.teacher`), scores every (question,
first answer, context) of the first `--questions` questions of each `--files` file over their top
`--contexts` with `build_teacher_scores` (whole passages, the teacher's own prompt), and prints gold
and has-answer Recall@1 and @5 of the teacher's order and BM25's (the file's order) on the same
questions, and how often the teacher's first pick holds the answer but is not the gold passage.

    python benchmarks/teacher_ranking.py --questions 100
    python benchmarks/teacher_ranking.py --question-template none   # the answer alone
    python benchmarks/teacher_ranking.py --config configs/squad_smollm2.yaml --files data/squad/test.jsonl
"""

from __future__ import annotations

import argparse
import itertools

import torch

from rerag.data.fid_format import read_fid
from rerag.fit_config import build_fit
from rerag.metrics import first_hit_rank, hits_at_k
from rerag.teacher_cache import TeacherScores, build_teacher_scores

#: The question-and-answer teacher's prompt measured in BENCHMARKS.md.
QUESTION_TEMPLATE = "Passage: {text}\nWrite a question that this passage answers."
COLUMNS = ["gold R@1", "gold R@5", "has-answer R@1", "has-answer R@5", "first pick holds the answer, not gold"]


def teacher_orders(teacher, records: list[dict], question_template: str | None = None) -> dict[str, list[torch.Tensor]]:
    """Per order, per record, F_ij of its first answer for each of its contexts (the teacher's prompt,
    whole passages): the answer alone and, with `question_template`, the question's likelihood added
    (one `build_teacher_scores` pass, which keeps the question's part on its own)."""
    triples = [(r["question"], r["answers"][0], c) for r in records for c in r["ctxs"]]
    return cached_orders(
        build_teacher_scores(teacher, triples, key="teacher_ranking", question_template=question_template), records
    )


def cached_orders(cache: TeacherScores, records: list[dict]) -> dict[str, list[torch.Tensor]]:
    """`teacher_orders` read from scores already computed by `build_teacher_scores`."""
    f = [cache.lookup([r["question"]], [r["answers"][0]], [r["ctxs"]])[0] for r in records]
    if not cache.question_scores:
        return {"teacher, answer (eq. 8)": f}
    answer = [f_r - cache.question_lookup([r["question"]], [r["ctxs"]])[0] for f_r, r in zip(f, records)]
    return {"teacher, answer (eq. 8)": answer, "teacher, question and answer": f}


def recall_row(order: list[torch.Tensor], records: list[dict]) -> list[float]:
    """The COLUMNS of one order (a score per context of each record, higher first)."""
    row = []
    for label in ("gold", "has_answer"):
        ranks = [
            first_hit_rank(s, torch.tensor([bool(c.get(label)) for c in r["ctxs"]])) for s, r in zip(order, records)
        ]
        row += [float(hits_at_k(ranks, k).mean()) for k in (1, 5)]
    firsts = [r["ctxs"][int(s.argmax())] for s, r in zip(order, records)]
    return row + [sum(bool(c.get("has_answer")) and not c.get("gold") for c in firsts) / len(records)]


def rank_file(
    teacher, path: str, questions: int, contexts: int, question_template: str | None = None
) -> dict[str, list[float]]:
    """The COLUMNS of the teacher's order (argmax F of the answer, and of the question and answer
    with a `question_template`) and BM25's (the file's order) over the first `questions` questions
    of `path`, their top `contexts` contexts each."""
    records = list(itertools.islice(read_fid(path), questions))  # a bad record names its file, line and field
    for r in records:
        r["ctxs"] = r["ctxs"][:contexts]
    bm25 = [-torch.arange(len(r["ctxs"]), dtype=torch.float) for r in records]
    orders = teacher_orders(teacher, records, question_template)
    return {name: recall_row(order, records) for name, order in (orders | {"BM25": bm25}).items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/squad_smollm2_teacher.yaml")
    parser.add_argument("--files", nargs="+", default=["data/squad/test.jsonl", "data/squad_sentences/test.jsonl"])
    parser.add_argument("--questions", type=int, default=100, help="the first N questions of each file")
    parser.add_argument("--contexts", type=int, default=20, help="BM25's top N contexts per question")
    parser.add_argument(
        "--question-template",
        default=QUESTION_TEMPLATE,
        help="the question-and-answer teacher's prompt, a passage without the question (none: that order is left out)",
    )
    args = parser.parse_args()

    question_template = None if args.question_template == "none" else args.question_template
    module = build_fit(["--config", args.config]).model  # no fit: pairs are scored here, no cache is written
    (teacher, _), name = module.teacher_generator(), module.teacher_spec.name_or_path
    print(f"teacher: {name}; first {args.questions} questions, top {args.contexts}\n")
    print(f"| file | order | {' | '.join(COLUMNS)} |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for path in args.files:
        rows = rank_file(teacher, path, args.questions, args.contexts, question_template)
        for order, row in rows.items():
            print(f"| {path} | {order} | {' | '.join(f'{v:.2f}' for v in row)} |", flush=True)


if __name__ == "__main__":
    main()
