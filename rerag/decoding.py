"""Answer decoding: rank contexts, keep the top k, marginalize per-context answers (eq. 6),
fast (each answer scored under its own context) or thorough (under every kept context)."""

from __future__ import annotations

import torch

from erag.answers import normalize_answer


def marginalize_answers(
    answers: list[str], context_scores: torch.Tensor, answer_loglik: torch.Tensor
) -> tuple[str, float]:
    """Fast RAG-sequence marginalization (eq. 6) over one question's kept contexts.

    `answers[j]` was generated from context j with log-likelihood `answer_loglik[j]`;
    `context_scores` are the contexts' logits (the RE's log-odds s, or the retriever's scores),
    so P(j) = softmax(scores). Answers equal after SQuAD normalization are one candidate:
    P(y) = sum_{j: y_j = y} P(j) P_G(y_j | q, c_j). Returns the best answer and log P(y)."""
    log_w = torch.log_softmax(context_scores.float(), dim=-1) + answer_loglik.float()
    groups: dict[str, list[int]] = {}
    for j, a in enumerate(answers):
        groups.setdefault(normalize_answer(a), []).append(j)
    best, best_score = "", -float("inf")
    for members in groups.values():
        score = torch.logsumexp(log_w[members], dim=0).item()
        if score > best_score:
            best, best_score = answers[members[0]], score
    return best, best_score


def top_k_per_question(scores: torch.Tensor, counts: torch.Tensor, k: int) -> list[torch.Tensor]:
    """Flat indices of each question's k best-scored contexts, best first."""
    out, start = [], 0
    for n in counts.tolist():
        order = torch.argsort(scores[start : start + n], descending=True, stable=True)[:k]
        out.append(order + start)
        start += n
    return out


def unique_answers(answers: list[str]) -> list[str]:
    """One surface form per normalized answer (SQuAD normalization), in first-seen order:
    the candidate set of thorough marginalization."""
    seen: dict[str, str] = {}
    for a in answers:
        seen.setdefault(normalize_answer(a), a)
    return list(seen.values())


def thorough_marginalize(
    candidates: list[str], context_scores: torch.Tensor, answer_loglik: torch.Tensor
) -> tuple[str, float]:
    """Thorough RAG-sequence marginalization (eq. 6 with every context scoring every candidate).

    `answer_loglik[y, j] = log P_G(candidates[y] | q, c_j)` for all kept contexts j, not only the
    one that generated y; P(y) = sum_j P(j) P_G(y | q, c_j) with P(j) = softmax(context_scores)
    (P_RE of eq. 5 for the RE's log-odds). Costs one scoring pass per (candidate, context) pair,
    where the fast `marginalize_answers` treats P_G(y | q, c_j) as 0 unless c_j produced y.
    Returns the best candidate and log P(y)."""
    log_p = torch.logsumexp(torch.log_softmax(context_scores.float(), dim=-1) + answer_loglik.float(), dim=-1)
    best = int(log_p.argmax())
    return candidates[best], log_p[best].item()
