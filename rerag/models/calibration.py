"""Calibration maps an exported RE carries: from the log-odds s (eq. 4) to a probability.

The RE-RAG losses see s only through softmax_j(s) and p_true + p_false, so sigmoid(s) is a score,
not a probability. A calibrator is a monotone map fitted on (score, label) pairs from held-out data:

- `PlattCalibrator`: P = sigmoid(a s + b), (a, b) by maximum likelihood (SciPy). With
  `temperature_only`, b = 0 and a = 1 / T: temperature scaling, which keeps sigmoid's even odds at s = 0.
- `IsotonicCalibrator`: the non-decreasing step map of least squared error (pool-adjacent-violators,
  scikit-learn's `IsotonicRegression`), applied by linear interpolation between its knots.

Two uses, both in `calibration.json` beside the RE's weights (`Calibration`; loaded by
`RelevanceEstimator.from_pretrained`): `per_context`, P(context holds an answer | s); `set_level`
(`SetCalibrator`), P(the kept top-k holds an answer | max_j s_j over the top-k), valid only for the
k and the list depth N it was fitted for. Fitting lives here with the maps so that a calibrator is
one object; metrics, reports and the `rerag calibrate` pipeline are in `rerag.infer.calibration`.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit

CALIBRATION_FILE = "calibration.json"


def _as_arrays(scores, labels=None) -> tuple[np.ndarray, np.ndarray | None]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if not np.isfinite(s).all():
        raise ValueError("calibration scores must be finite")
    if labels is None:
        return s, None
    y = np.asarray(labels, dtype=np.float64).reshape(-1)
    if len(y) != len(s) or not len(s) or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError(f"need as many 0/1 labels as scores, at least one: got {len(s)} scores, {len(y)} labels")
    return s, y


class Calibrator:
    """A fitted map from log-odds to probabilities; `fitted_on` says on what (n, positives, source)."""

    kind = ""

    def __init__(self):
        self.fitted_on: dict[str, Any] | None = None

    def fit(self, scores, labels, source: str = "") -> Calibrator:
        s, y = _as_arrays(scores, labels)
        self._fit(s, y)
        self.fitted_on = {"n": int(len(y)), "positives": int(y.sum()), "source": source}
        return self

    def __call__(self, scores) -> np.ndarray:
        if self.fitted_on is None:
            raise RuntimeError(f"the {self.kind} calibrator is not fitted")
        return self._apply(_as_arrays(scores)[0])

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self._params(), "fitted_on": self.fitted_on}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Calibrator:
        """Rebuild any calibrator from its `to_dict()`."""
        kinds = {"platt": PlattCalibrator, "temperature": PlattCalibrator, "isotonic": IsotonicCalibrator}
        if data.get("kind") not in kinds:
            raise ValueError(f"unknown calibrator kind {data.get('kind')!r}; known: {sorted(kinds)}")
        out = kinds[data["kind"]]._from_params(data)
        out.fitted_on = data["fitted_on"]
        return out


class PlattCalibrator(Calibrator):
    """P = sigmoid(a s + b); `temperature_only` fixes b = 0 (temperature T = 1 / a)."""

    def __init__(self, temperature_only: bool = False, a: float = 1.0, b: float = 0.0):
        super().__init__()
        self.temperature_only, self.a, self.b = temperature_only, a, b
        self.kind = "temperature" if temperature_only else "platt"

    @property
    def temperature(self) -> float:
        return 1.0 / self.a

    def _fit(self, s: np.ndarray, y: np.ndarray) -> None:
        from scipy.optimize import minimize

        def nll(theta):  # mean -log-likelihood of Bernoulli(sigmoid(z)) and its gradient
            a, b = theta[0], (0.0 if self.temperature_only else theta[1])
            z = a * s + b
            residual = expit(z) - y
            grad = [np.mean(residual * s)] + ([] if self.temperature_only else [np.mean(residual)])
            return np.mean(np.logaddexp(0.0, z) - y * z), np.array(grad)

        start = [1.0] if self.temperature_only else [1.0, 0.0]
        result = minimize(nll, np.array(start), jac=True, method="L-BFGS-B")
        self.a = float(result.x[0])
        self.b = 0.0 if self.temperature_only else float(result.x[1])

    def _apply(self, s: np.ndarray) -> np.ndarray:
        return expit(self.a * s + self.b)

    def _params(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b}

    @classmethod
    def _from_params(cls, data):
        return cls(data["kind"] == "temperature", float(data["a"]), float(data["b"]))


class IsotonicCalibrator(Calibrator):
    """The least-squares non-decreasing map (scikit-learn's pool-adjacent-violators), kept as knots
    (x, y) and applied by interpolation, constant beyond the end knots; applying needs only NumPy."""

    kind = "isotonic"

    def __init__(self, x: list[float] | None = None, y: list[float] | None = None):
        super().__init__()
        self.x = np.asarray([] if x is None else x, dtype=np.float64)
        self.y = np.asarray([] if y is None else y, dtype=np.float64)

    def _fit(self, s: np.ndarray, y: np.ndarray) -> None:
        from sklearn.isotonic import IsotonicRegression

        fitted = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(s, y)
        self.x, self.y = fitted.X_thresholds_.astype(np.float64), fitted.y_thresholds_.astype(np.float64)

    def _apply(self, s: np.ndarray) -> np.ndarray:
        return np.interp(s, self.x, self.y)

    def _params(self) -> dict[str, Any]:
        return {"x": self.x.tolist(), "y": self.y.tolist()}

    @classmethod
    def _from_params(cls, data):
        return cls(data["x"], data["y"])


class SetCalibrator:
    """P(the kept top-k holds an answer | confidence), the confidence being max_j s_j over the RE's
    top-k of a list of depth N (the log-odds of `rerag predict-file`'s max_j sigmoid(s_j)).

    Keeping more contexts, or reranking a deeper list, changes how often the kept set holds an
    answer at a given confidence, so the map holds only for its own k and N: applying it with
    others warns, naming both."""

    def __init__(self, calibrator: Calibrator, k: int, depth: int):
        self.calibrator, self.k, self.depth = calibrator, int(k), int(depth)

    def fit(self, scores, labels, source: str = "") -> SetCalibrator:
        self.calibrator.fit(scores, labels, source)
        return self

    @property
    def fitted_on(self) -> dict[str, Any] | None:
        return self.calibrator.fitted_on

    def __call__(self, scores, *, k: int, depth: int) -> np.ndarray:
        if (k, depth) != (self.k, self.depth):
            warnings.warn(
                f"set-level calibrator fitted for top-k {self.k} of list depth N {self.depth}, applied "
                f"with top-k {k} of depth N {depth}: its probabilities do not hold there",
                stacklevel=2,
            )
        return self.calibrator(scores)

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "depth": self.depth, **self.calibrator.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SetCalibrator:
        return cls(Calibrator.from_dict(data), data["k"], data["depth"])


@dataclass
class Calibration:
    """What `calibration.json` holds: either calibrator may be absent."""

    per_context: Calibrator | None = None
    set_level: SetCalibrator | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_context": self.per_context and self.per_context.to_dict(),
            "set_level": self.set_level and self.set_level.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        return cls(
            data.get("per_context") and Calibrator.from_dict(data["per_context"]),
            data.get("set_level") and SetCalibrator.from_dict(data["set_level"]),
        )

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / CALIBRATION_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, directory: str | Path) -> Calibration | None:
        """The folder's calibration, or None when it has no `calibration.json`."""
        path = Path(directory) / CALIBRATION_FILE
        return cls.from_dict(json.loads(path.read_text())) if path.is_file() else None
