"""The three RE-RAG training losses (section 2.3), each a plain function on [B, K] tensors, and
an optional fourth that is not the paper's (`has_answer_anchor`), and the pointwise baseline's
(`pointwise_relevance`).

Inputs per question i and context j:
  s[i, j]   = log p_true - log p_false, the RE's log-odds (eq. 4); P_RE = softmax_j(s) (eq. 5)
  F[i, j]   = log P_G(a_i | q_i, c_j), the generator's answer log-likelihood (eq. 8)
  log_p_true, log_p_false under the RE's full-vocabulary softmax (eq. 3, eq. 11)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class LossSpec:
    """The weights and variants of `rerag_loss` (eq. 12) a fit trains with (`model.loss`).

    Args:
        alpha_re: weight a1 of L_re, the KL between the generator's Q_G and P_RE (eq. 10); at least 0.
        alpha_tok: weight a2 of L_tok, the RE's off-label mass (eq. 11); at least 0.
        alpha_anchor: weight of BCE(sigmoid(s), has_answer), not in the paper (0: off); at least 0.
        kl_direction: generator_to_re = KL(Q_G || P_RE) (released code) or re_to_generator (eq. 10 as printed).
        teacher_temperature: Q_G = softmax_j(F / T) in L_re (1: eq. 9; above 1 softens the teacher, not in
            the paper); L_gen keeps F. Positive.
        normalized: eq. 3's log-odds (true) or s = log p_true (Table 7's ablation).
        gen_reduction: L_gen's reduction over a batch's questions: mean, or sum as the released code does.
        re_clamp: clamp RE_ij to [eps, 1 - eps] before the log-odds, as the released code does with 1e-5
            (None: off); in (0, 0.5).
    """

    alpha_re: float = 1.0
    alpha_tok: float = 1.0
    alpha_anchor: float = 0.0
    kl_direction: Literal["generator_to_re", "re_to_generator"] = "generator_to_re"
    teacher_temperature: float = 1.0
    normalized: bool = True
    gen_reduction: Literal["mean", "sum"] = "mean"
    re_clamp: float | None = None

    def check(self) -> None:
        """A setting out of its range, named (`model.loss.<field>`)."""
        for field in ("alpha_re", "alpha_tok", "alpha_anchor"):
            if getattr(self, field) < 0:
                raise ValueError(f"model.loss.{field}: must be at least 0, got {getattr(self, field)}")
        if not self.teacher_temperature > 0:
            raise ValueError(f"model.loss.teacher_temperature: must be positive, got {self.teacher_temperature}")
        if self.re_clamp is not None and not 0 < self.re_clamp < 0.5:
            raise ValueError(f"model.loss.re_clamp: must be in (0, 0.5) or null, got {self.re_clamp}")


torch.serialization.add_safe_globals([LossSpec])  # checkpoints' hyperparameters hold it


def marginal_nll(
    s: torch.Tensor, answer_loglik: torch.Tensor, reduction: Literal["mean", "sum"] = "mean"
) -> torch.Tensor:
    """L_gen = -mean_i log sum_j P_RE(i, j) P_G(a_i | q_i, c_j).

    The RAG-sequence marginal likelihood, marginalized inside the log as the released code does
    (eq. 7 as printed sums outside the log). Gradients reach both the RE (through P_RE) and
    the generator (through F). `reduction="sum"` sums over the batch's questions, as the released
    code does while it averages L_re and L_tok (its L_gen then weighs B times more)."""
    log_p_re = torch.log_softmax(s.float(), dim=-1)
    nll = -torch.logsumexp(log_p_re + answer_loglik.float(), dim=-1)
    return nll.sum() if reduction == "sum" else nll.mean()


def relevance_log_odds(
    log_p_true: torch.Tensor, log_p_false: torch.Tensor, normalized: bool = True, clamp: float | None = None
) -> torch.Tensor:
    """s = log p_true - log p_false, the log-odds of eq. 3's normalized RE (eq. 4), or with
    `normalized=False` log p_true alone (Table 7's ablation). `clamp` = eps bounds the RE to
    [eps, 1 - eps] before the log-odds, as the released code does (eps 1e-5: |s| <= 11.51, with zero
    gradient beyond; unnormalized: log p_true <= log(1 - eps) and >= log eps)."""
    if not normalized:
        s = log_p_true
        return s if clamp is None else s.clamp(math.log(clamp), math.log1p(-clamp))
    s = log_p_true - log_p_false
    if clamp is None:
        return s
    bound = math.log1p(-clamp) - math.log(clamp)
    return s.clamp(-bound, bound)


def kl_to_generator(
    s: torch.Tensor,
    answer_loglik: torch.Tensor,
    direction: Literal["generator_to_re", "re_to_generator"] = "generator_to_re",
    temperature: float = 1.0,
) -> torch.Tensor:
    """L_re: KL between Q_G = softmax_j(F / T) with F detached (eq. 9 at T = 1) and P_RE (eq. 5),
    mean over i.

    `generator_to_re` is KL(Q_G || P_RE), the released code's choice; `re_to_generator` is
    KL(P_RE || Q_G), the direction eq. 10 prints. A temperature T > 1 (not in the paper; Hinton et
    al.'s distillation) softens a teacher whose F differ by many nats, so that Q_G also ranks the
    contexts it does not put first."""
    if not temperature > 0:
        raise ValueError(f"the teacher's temperature must be positive, got {temperature}")
    log_p_re = torch.log_softmax(s.float(), dim=-1)
    log_q_g = torch.log_softmax(answer_loglik.detach().float() / temperature, dim=-1)
    if direction == "generator_to_re":
        kl = F.kl_div(log_p_re, log_q_g, log_target=True, reduction="none")
    elif direction == "re_to_generator":
        kl = F.kl_div(log_q_g, log_p_re, log_target=True, reduction="none")
    else:
        raise ValueError(f"unknown KL direction {direction!r}")
    return kl.sum(dim=-1).mean()


def off_label_mass(log_p_true: torch.Tensor, log_p_false: torch.Tensor) -> torch.Tensor:
    """L_tok = mean_ij (1 - p_true - p_false): the RE's probability of any other token (eq. 11)."""
    return (1.0 - log_p_true.exp() - log_p_false.exp()).mean()


def has_answer_anchor(s: torch.Tensor, has_answer: torch.Tensor) -> torch.Tensor:
    """L_anchor = mean_ij BCE(sigmoid(s_ij), has_answer_ij): ties each log-odds to the distant
    has-answer label, so that sigmoid(s) means "this context holds an answer" across questions.

    Not in the paper: its losses see s only through softmax_j(s) (L_gen, L_re), which is blind to
    a shift of a question's scores, and through p_true + p_false (L_tok), which is blind to their
    ratio. Off unless weighted (`alpha_anchor`)."""
    return F.binary_cross_entropy_with_logits(s.float(), has_answer.float())


def pointwise_relevance(log_p_true: torch.Tensor, log_p_false: torch.Tensor, has_answer: torch.Tensor) -> torch.Tensor:
    """L_point = -mean_ij [y_ij log p_true + (1 - y_ij) log p_false], y the has-answer label: MonoT5's
    objective (Nogueira et al., 2020), cross-entropy of the target token "true" or "false" under
    the full-vocabulary softmax, per (question, context) and with no generator. Not eq. 12: the
    pointwise baseline that RE-RAG's Tables 2 and 3 compare with."""
    y = has_answer.float()
    return -(y * log_p_true.float() + (1 - y) * log_p_false.float()).mean()


def rerag_loss(
    log_p_true: torch.Tensor,
    log_p_false: torch.Tensor,
    answer_loglik: torch.Tensor,
    alpha_re: float = 1.0,
    alpha_tok: float = 1.0,
    kl_direction: Literal["generator_to_re", "re_to_generator"] = "generator_to_re",
    alpha_anchor: float = 0.0,
    has_answer: torch.Tensor | None = None,
    normalized: bool = True,
    gen_reduction: Literal["mean", "sum"] = "mean",
    re_clamp: float | None = None,
    teacher_temperature: float = 1.0,
) -> dict[str, torch.Tensor]:
    """L = L_gen + a1 L_re + a2 L_tok (eq. 12), plus alpha_anchor L_anchor when that weight is not
    zero (then `has_answer` [B, K] is needed); every term is returned for logging.

    `normalized=False` is the ablation of Table 7: the relevance score is log p_true, the "true"
    token's full-vocabulary log-probability, instead of the log-odds of eq. 3's normalized RE.
    `gen_reduction="sum"` and `re_clamp=1e-5` are the released code's two details
    (`marginal_nll`, `relevance_log_odds`); `teacher_temperature` softens Q_G in L_re alone
    (`kl_to_generator`)."""
    s = relevance_log_odds(log_p_true, log_p_false, normalized, re_clamp)
    parts = {
        "loss_gen": marginal_nll(s, answer_loglik, gen_reduction),
        "loss_re": kl_to_generator(s, answer_loglik, kl_direction, teacher_temperature),
        "loss_tok": off_label_mass(log_p_true, log_p_false),
    }
    parts["loss"] = parts["loss_gen"] + alpha_re * parts["loss_re"] + alpha_tok * parts["loss_tok"]
    if alpha_anchor:
        if has_answer is None:
            raise ValueError("alpha_anchor needs the contexts' has_answer labels")
        parts["loss_anchor"] = has_answer_anchor(s, has_answer)
        parts["loss"] = parts["loss"] + alpha_anchor * parts["loss_anchor"]
    return parts
