import json
import warnings

import numpy as np
import pytest
from scipy.special import expit

from rerag.cli import main
from rerag.data.fid_format import read_fid
from rerag.infer.calibration import aurc, auroc, bootstrap, brier, ece, evaluate
from rerag.infer.predict import predict
from rerag.infer.readers import RAGReader
from rerag.infer.rerank import rerank
from rerag.models.calibration import Calibration, Calibrator, IsotonicCalibrator, PlattCalibrator, SetCalibrator
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator


def synthetic(n=20000, temperature=2.5, shift=0.0, seed=0):
    """Log-odds s and labels ~ Bernoulli(sigmoid(s / T + shift))."""
    rng = np.random.default_rng(seed)
    s = rng.normal(0.0, 4.0, n)
    return s, (rng.random(n) < expit(s / temperature + shift)).astype(float)


def test_temperature_scaling_recovers_the_temperature():
    s, y = synthetic(temperature=2.5)
    calibrator = PlattCalibrator(temperature_only=True).fit(s, y, source="synthetic")
    assert calibrator.temperature == pytest.approx(2.5, rel=0.08) and calibrator.b == 0.0
    assert calibrator.fitted_on == {"n": 20000, "positives": int(y.sum()), "source": "synthetic"}
    assert ece(calibrator(s), y) < 0.02 < 0.1 < ece(expit(s), y)
    s, y = synthetic(temperature=2.5, shift=1.0)
    platt = PlattCalibrator().fit(s, y)
    assert (platt.temperature, platt.b) == (pytest.approx(2.5, rel=0.08), pytest.approx(1.0, abs=0.1))


def test_isotonic_is_monotone_and_calibrated_in_sample():
    s, y = synthetic(temperature=2.5)
    calibrator = IsotonicCalibrator().fit(s, y)
    p = calibrator(np.sort(s))
    assert np.all(np.diff(p) >= 0) and 0.0 <= p.min() and p.max() <= 1.0
    assert calibrator([-1e6, 1e6]).tolist() == [calibrator.y[0], calibrator.y[-1]]  # constant beyond the knots
    assert ece(calibrator(s), y) < 0.01


def test_ece_is_near_zero_when_calibrated_and_large_when_not():
    rng = np.random.default_rng(1)
    p = rng.random(20000)
    y = (rng.random(20000) < p).astype(float)
    assert ece(p, y) < 0.02
    assert ece(p**3, y) > 0.15  # underconfident everywhere
    # Two bins by hand: (0.1, 0.1 | labels 0, 1) and (0.9 | label 1): (2/3)|0.5 - 0.1| + (1/3)|1 - 0.9|.
    assert ece([0.1, 0.1, 0.9], [0, 1, 1]) == pytest.approx(2 / 3 * 0.4 + 1 / 3 * 0.1)
    assert brier([0.1, 0.1, 0.9], [0, 1, 1]) == pytest.approx((0.01 + 0.81 + 0.01) / 3)


def test_aurc_of_a_perfect_ranking_is_below_a_random_one():
    rng = np.random.default_rng(2)
    y = (rng.random(2000) < 0.4).astype(float)
    perfect, random = aurc(y + 0.0, y), aurc(rng.random(2000), y)
    positives, n = int(y.sum()), len(y)  # perfect: (1/n) sum_{i > P} (1 - P/i); random: about 1 - base rate
    assert perfect == pytest.approx(sum(1 - positives / i for i in range(positives + 1, n + 1)) / n)
    assert perfect < 0.3 < 0.5 < random == pytest.approx(1 - positives / n, abs=0.05)
    # By hand: order 1, 0, 1 -> risks 0, 1/2, 1/3.
    assert aurc([0.9, 0.5, 0.2], [1, 0, 1]) == pytest.approx((0 + 1 / 2 + 1 / 3) / 3)
    assert auroc(y, y) == 1.0 and np.isnan(auroc([0.1, 0.2], [1, 1]))


def test_report_metrics_come_with_seeded_bootstrap_intervals():
    s, y = synthetic(n=500)
    after = PlattCalibrator().fit(s, y)(s)
    report = evaluate(y, expit(s), after, resamples=50, seed=3)
    for key in ("ece_before", "ece_after", "brier_before", "brier_after", "auroc", "aurc"):
        low, high = report[f"{key}_ci"]
        # ECE's resamples are biased upward (noise adds to each bin's gap): its interval may lie above it.
        assert low <= high and (key.startswith("ece") or low <= report[key] <= high), key
    assert report["ece_after"] < report["ece_before"] and len(report["reliability_bins"]["after"]) == 15
    assert evaluate(y, expit(s), after, resamples=50, seed=3) == report
    intervals = bootstrap({"mean": lambda i: float(y[i].mean())}, len(y), resamples=20, seed=0)
    assert intervals == bootstrap({"mean": lambda i: float(y[i].mean())}, len(y), resamples=20, seed=0)


def test_a_set_level_calibrator_warns_with_another_k_or_depth():
    s, y = synthetic(n=500)
    calibrator = SetCalibrator(PlattCalibrator(), k=5, depth=100).fit(s, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calibrator(s, k=5, depth=100)
    with pytest.warns(UserWarning, match="top-k 5 of list depth N 100, applied with top-k 10 of depth N 100"):
        calibrator(s, k=10, depth=100)
    with pytest.warns(UserWarning, match="applied with top-k 5 of depth N 20"):
        calibrator(s, k=5, depth=20)


@pytest.mark.parametrize(
    "calibrator",
    [PlattCalibrator(), PlattCalibrator(temperature_only=True), IsotonicCalibrator()],
    ids=["platt", "temperature", "isotonic"],
)
def test_to_dict_from_dict_round_trip(calibrator):
    s, y = synthetic(n=300)
    calibrator.fit(s, y, source="dev")
    copy = Calibrator.from_dict(json.loads(json.dumps(calibrator.to_dict())))
    assert type(copy) is type(calibrator) and copy.fitted_on == calibrator.fitted_on
    np.testing.assert_allclose(copy(s), calibrator(s))
    both = Calibration(calibrator, SetCalibrator(calibrator, k=3, depth=12))
    again = Calibration.from_dict(json.loads(json.dumps(both.to_dict())))
    assert (again.set_level.k, again.set_level.depth) == (3, 12)
    np.testing.assert_allclose(again.set_level(s, k=3, depth=12), calibrator(s))
    with pytest.raises(RuntimeError, match="not fitted"):
        type(calibrator)()(s)


def test_calibrate_saves_with_the_re_and_rerank_writes_calibrated_probabilities(export_dir, world_dir, tmp_path):
    folder = export_dir / "estimator"
    assert RelevanceEstimator.from_pretrained(folder).calibration is None
    main(
        [
            "calibrate",
            "--estimator",
            str(folder),
            "--dev",
            str(world_dir / "dev.jsonl"),
            "--test",
            str(world_dir / "test.jsonl"),
            "--out",
            str(tmp_path / "report"),
            "--top_k",
            "3",
            "--resamples",
            "20",
        ]
    )
    report = json.loads((tmp_path / "report" / "calibration_report.json").read_text())
    for key in ("ece_before", "ece_after", "brier_before", "brier_after", "auroc", "aurc"):
        assert key in report and f"{key}_ci" in report and key in report["per_context"]
    assert report["bins"]["scheme"].startswith("15 equal-width bins") and (report["top_k"], report["depth"]) == (3, 12)
    assert report["evaluated_on"].endswith("test.jsonl") and "set_level" in report["dev"]
    assert all((tmp_path / "report" / name).stat().st_size > 0 for name in report["reliability"].values())

    estimator = RelevanceEstimator.from_pretrained(folder)
    calibration = estimator.calibration
    assert calibration.set_level.fitted_on["n"] == 12 and calibration.per_context.fitted_on["n"] == 12 * 12
    main(
        [
            "rerank",
            "--estimator",
            str(folder),
            "--input",
            str(world_dir / "dev.jsonl"),
            "--output",
            str(tmp_path / "dev.jsonl"),
            "--top_k",
            "5",
        ]
    )
    rows = [json.loads(line) for line in (tmp_path / "dev.jsonl").read_text().splitlines()]
    assert len(list(read_fid(tmp_path / "dev.jsonl"))) == len(rows)  # still valid FiD
    for row in rows:
        assert row["re_prob_calibrated"] is True
        scores = [c["re_score"] for c in row["ctxs"]]
        np.testing.assert_allclose([c["re_prob"] for c in row["ctxs"]], calibration.per_context(scores), rtol=1e-6)
    record = next(iter(read_fid(world_dir / "dev.jsonl")))
    scores = estimator.score(record["question"], record["ctxs"])  # still the raw log-odds
    assert [c["re_score"] for c in rows[0]["ctxs"]] == pytest.approx(sorted(scores.tolist(), reverse=True)[:5])

    # predictions' confidence is the set-level P(the kept top-3 holds an answer), fitted for k 3 of depth 12
    reader = RAGReader(Generator.from_pretrained(export_dir / "generator").as_lm())
    for p in predict(list(read_fid(world_dir / "dev.jsonl"))[:3], estimator, reader, top_k=3):
        best = max(c["re_score"] for c in p["contexts"])
        assert p["confidence_calibration"] == "set_level" and p["confidence_raw"] == pytest.approx(expit(best))
        assert p["confidence"] == pytest.approx(calibration.set_level.calibrator([best])[0])

    estimator.calibration = None  # re-saving an uncalibrated RE drops the file, fitted on other scores
    estimator.save_pretrained(folder)
    assert not (folder / "calibration.json").exists()
    plain = next(rerank(RelevanceEstimator.from_pretrained(folder), [record], top_k=2))
    assert plain["re_prob_calibrated"] is False
    assert plain["ctxs"][0]["re_prob"] == pytest.approx(expit(plain["ctxs"][0]["re_score"]))
