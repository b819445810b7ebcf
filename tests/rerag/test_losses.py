import math

import pytest
import torch

from rerag.losses import (
    has_answer_anchor,
    kl_to_generator,
    marginal_nll,
    off_label_mass,
    pointwise_relevance,
    relevance_log_odds,
    rerag_loss,
)

# 2 questions x 3 contexts
S = torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 2.0]])
F = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -0.5, -1.0]])


def softmax(row):
    e = [math.exp(x) for x in row]
    return [x / sum(e) for x in e]


def test_marginal_nll_by_hand():
    expected = (
        -sum(math.log(sum(p * math.exp(f) for p, f in zip(softmax(s), fr))) for s, fr in zip(S.tolist(), F.tolist()))
        / 2
    )
    assert marginal_nll(S, F).item() == pytest.approx(expected, rel=1e-6)


def test_marginal_nll_equals_naive_sum_of_products():
    s, f = torch.randn(5, 7, dtype=torch.float64), torch.randn(5, 7, dtype=torch.float64) * 3
    naive = -torch.log((torch.softmax(s, -1) * f.exp()).sum(-1)).mean()
    assert marginal_nll(s, f).item() == pytest.approx(naive.item(), rel=1e-5)


def test_kl_both_directions_by_hand():
    def kl(p, q):
        return sum(a * math.log(a / b) for a, b in zip(p, q))

    p_re = [softmax(r) for r in S.tolist()]
    q_g = [softmax(r) for r in F.tolist()]
    forward = sum(kl(q, p) for q, p in zip(q_g, p_re)) / 2
    backward = sum(kl(p, q) for q, p in zip(q_g, p_re)) / 2
    assert kl_to_generator(S, F, "generator_to_re").item() == pytest.approx(forward, rel=1e-5)
    assert kl_to_generator(S, F, "re_to_generator").item() == pytest.approx(backward, rel=1e-5)
    with pytest.raises(ValueError, match="direction"):
        kl_to_generator(S, F, "sideways")


def test_teacher_temperature_softens_q_g_in_l_re_alone():
    def kl(p, q):
        return sum(a * math.log(a / b) for a, b in zip(p, q))

    t = 3.0
    q_g = [softmax([f / t for f in r]) for r in F.tolist()]
    p_re = [softmax(r) for r in S.tolist()]
    expected = sum(kl(q, p) for q, p in zip(q_g, p_re)) / 2
    assert kl_to_generator(S, F, temperature=t).item() == pytest.approx(expected, rel=1e-5)
    assert kl_to_generator(S, F, temperature=t).item() != pytest.approx(kl_to_generator(S, F).item(), rel=1e-3)
    lp_t, lp_f = torch.log(torch.full((2, 3), 0.6)), torch.log(torch.full((2, 3), 0.3))
    plain, soft = rerag_loss(lp_t, lp_f, F), rerag_loss(lp_t, lp_f, F, teacher_temperature=t)
    assert soft["loss_gen"] == plain["loss_gen"] and soft["loss_tok"] == plain["loss_tok"]
    assert soft["loss_re"] != plain["loss_re"]
    with pytest.raises(ValueError, match="temperature"):
        kl_to_generator(S, F, temperature=0.0)


def test_kl_does_not_train_the_generator():
    f = F.clone().requires_grad_()
    s = S.clone().requires_grad_()
    kl_to_generator(s, f).backward()
    assert f.grad is None and s.grad.abs().sum() > 0


def test_off_label_mass_by_hand():
    p_t = torch.tensor([[0.5, 0.2, 0.1], [0.9, 0.05, 0.3]])
    p_f = torch.tensor([[0.3, 0.7, 0.1], [0.05, 0.9, 0.6]])
    expected = sum(1 - a - b for a, b in zip(p_t.flatten().tolist(), p_f.flatten().tolist())) / 6
    assert off_label_mass(p_t.log(), p_f.log()).item() == pytest.approx(expected, rel=1e-6)


def test_total_is_weighted_sum():
    lp_t, lp_f = torch.log(torch.rand(2, 3) * 0.5), torch.log(torch.rand(2, 3) * 0.5)
    parts = rerag_loss(lp_t, lp_f, F, alpha_re=0.3, alpha_tok=2.0)
    assert parts["loss"].item() == pytest.approx(
        (parts["loss_gen"] + 0.3 * parts["loss_re"] + 2.0 * parts["loss_tok"]).item(), rel=1e-6
    )
    assert parts["loss_gen"].item() == pytest.approx(marginal_nll(lp_t - lp_f, F).item())


def test_single_context():
    lp_t, lp_f = torch.tensor([[-0.1]]), torch.tensor([[-2.5]])
    f = torch.tensor([[-1.7]])
    parts = rerag_loss(lp_t, lp_f, f)
    assert parts["loss_gen"].item() == pytest.approx(1.7)  # P_RE is 1 on the only context
    assert parts["loss_re"].item() == pytest.approx(0.0, abs=1e-7)


def test_extreme_logits_stay_finite():
    import kernels

    logits = torch.zeros(6, 50)
    logits[:, 3] = 1e4
    logits[::2, 4] = -1e4
    logits[1::2, 4] = 1e4
    logits.requires_grad_()
    lp_t, lp_f = kernels.true_false_logprobs(logits, 4, 3)
    f = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 5.0]])
    parts = rerag_loss(lp_t.view(2, 3), lp_f.view(2, 3), f)
    parts["loss"].backward()
    assert all(torch.isfinite(v) for v in parts.values())
    assert torch.isfinite(logits.grad).all()


def test_the_anchor_is_binary_cross_entropy_and_sees_a_shift_the_paper_losses_do_not():
    labels = torch.tensor([[True, False, False], [False, False, True]])
    expected = (
        -sum(
            math.log(1 / (1 + math.exp(-x))) if y else math.log(1 - 1 / (1 + math.exp(-x)))
            for x, y in zip(S.flatten().tolist(), labels.flatten().tolist())
        )
        / 6
    )
    assert has_answer_anchor(S, labels).item() == pytest.approx(expected, rel=1e-6)
    log_p_true, log_p_false = torch.full_like(S, -0.1), -0.1 - S
    plain = rerag_loss(log_p_true, log_p_false, F)
    shifted = rerag_loss(log_p_true + 2.0, log_p_false, F)  # every s of a question + 2: softmax_j unchanged
    assert shifted["loss_gen"].item() == pytest.approx(plain["loss_gen"].item(), rel=1e-6)
    assert shifted["loss_re"].item() == pytest.approx(plain["loss_re"].item(), abs=1e-6)
    assert "loss_anchor" not in plain  # off by default, as in the paper
    anchored = rerag_loss(log_p_true, log_p_false, F, alpha_anchor=0.5, has_answer=labels)
    assert anchored["loss"].item() == pytest.approx(plain["loss"].item() + 0.5 * expected, rel=1e-6)
    with pytest.raises(ValueError, match="has_answer"):
        rerag_loss(log_p_true, log_p_false, F, alpha_anchor=1.0)


def test_without_normalization_the_score_is_log_p_true():
    """Table 7's ablation: log p_false no longer enters the relevance score."""
    torch.manual_seed(0)
    log_p_true, log_p_false, f = -torch.rand(2, 4) * 3, -torch.rand(2, 4) * 3, -torch.rand(2, 4)
    ablated = rerag_loss(log_p_true, log_p_false, f, normalized=False)
    assert torch.allclose(ablated["loss_gen"], marginal_nll(log_p_true, f))
    assert torch.allclose(ablated["loss_re"], kl_to_generator(log_p_true, f))
    other_false = log_p_false.clone()
    other_false[:, 0] -= 2.0
    assert torch.allclose(rerag_loss(log_p_true, other_false, f, normalized=False)["loss_gen"], ablated["loss_gen"])
    assert not torch.allclose(
        rerag_loss(log_p_true, other_false, f)["loss_gen"], rerag_loss(log_p_true, log_p_false, f)["loss_gen"]
    )


def test_the_released_codes_sum_over_the_batch_weighs_l_gen_b_times():
    s = torch.tensor([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]])
    f = torch.tensor([[-1.0, -3.0], [-2.0, -0.5], [-4.0, -1.0]])
    mean = rerag_loss(s, torch.zeros_like(s), f)  # log p_false = 0: s = log p_true here
    summed = rerag_loss(s, torch.zeros_like(s), f, gen_reduction="sum")
    torch.testing.assert_close(summed["loss_gen"], 3 * mean["loss_gen"])
    torch.testing.assert_close(summed["loss_re"], mean["loss_re"])  # L_re and L_tok stay means
    torch.testing.assert_close(summed["loss_tok"], mean["loss_tok"])


def test_the_released_codes_clamp_bounds_the_log_odds_with_no_gradient_beyond():
    log_p_true = torch.tensor([-0.01, -20.0, -1.0], requires_grad=True)
    log_p_false = torch.tensor([-30.0, -0.01, -1.5])
    s = relevance_log_odds(log_p_true, log_p_false, clamp=1e-5)
    bound = math.log((1 - 1e-5) / 1e-5)  # 11.51
    assert s.tolist() == pytest.approx([bound, -bound, 0.5], abs=1e-4)
    s.sum().backward()
    assert log_p_true.grad.tolist() == [0.0, 0.0, 1.0]  # saturated entries get no gradient
    free = relevance_log_odds(log_p_true.detach(), log_p_false)
    assert free[0] > 29 and free[1] < -19  # unclamped, s is unbounded
    unnormalized = relevance_log_odds(torch.tensor([-30.0, -1e-9]), log_p_false[:2], normalized=False, clamp=1e-5)
    assert unnormalized.tolist() == pytest.approx([math.log(1e-5), math.log1p(-1e-5)])


def test_pointwise_relevance_is_the_label_tokens_cross_entropy():
    log_p_true = torch.log(torch.tensor([[0.7, 0.2]]))
    log_p_false = torch.log(torch.tensor([[0.1, 0.6]]))
    loss = pointwise_relevance(log_p_true, log_p_false, torch.tensor([[True, False]]))
    assert loss.item() == pytest.approx(-(math.log(0.7) + math.log(0.6)) / 2, rel=1e-6)
