"""``python -m benchmarks --quality``: how good vfl's logistic regression is, against exact references.

On UCI's "default of credit card clients" (30,000 rows, 23 columns), as FATE ships it
(``default_credit_hetero_guest.csv`` and ``_host.csv``, in ``--data DIR``; vfl does not ship
them), converted back to the original units, split 80/20 (stratified, seed 0), it reports:

* scikit-learn's ``LogisticRegression()`` (exact log loss), on standardized columns (a
  ``StandardScaler`` pipeline) and on the raw columns: test AUC;
* the exact optimum of vfl's own objective, the Taylor loss
  ``(1/n) sum (log 2 - y z / 2 + z^2 / 8) + (alpha / 2) ||w||^2`` (intercept not penalised) on
  standardized columns, solved in closed form (:func:`taylor_optimum`): its test AUC and loss;
* vfl's training at each row of :func:`setting_rows` over ``--runs`` fresh secret random
  starts (and batch orders): test AUC min/median/max, their spread, the passes over the data
  (``n_iter``) and the final loss's relative gap to the optimum of the same objective.

The many runs are :func:`vfl.centralized.fit_gradient_descent` with the estimator's own
settings object (``VerticalLogisticRegression(**params)._settings()``): federated training equals
it for the same start, which the suite tests.  A few real federated runs (``--federated`` at
1024-bit keys with ``insecure=True``, for speed; ``--federated-2048`` at 2048 bits) confirm it:
each is replayed centrally from the start its parties drew and the loss curves compared.
Standardization is each column's ``(x - mean) / std`` over the training rows (population std),
what the parties do themselves when the estimator has ``standardize=True``; then the federated
runs get the columns in their original units, otherwise the bench standardizes them first.

Whatever the estimator's parameters are when it runs (``get_params()``), the row "defaults" is
``VerticalLogisticRegression()``: re-running the bench after the defaults change fills it.
The issue's goals (issue 19) are printed for that row as met or missed.

Without ``--data`` it says what is needed and runs the same report on scikit-learn's bundled
breast-cancer data instead (569 rows, already in original units; no unit recovery).

Original units (:func:`original_units`).  FATE z-scored every column over all 30,000 rows
(population std) and wrote six decimals.  The originals are integers, so each column's distinct
values lie on a grid ``z_min + k u``, ``k`` integer, ``u`` the z-distance of one original unit:
``u`` comes from the gaps between distinct values (:func:`integer_grid`: a first estimate from the
smallest gap, refined by least squares over ever more gaps and then positions, each time only over
the values whose ``k`` the current estimate already fixes beyond doubt), the offset from the
column's known original minimum (UCI's), ``x = minimum + k``.  LIMIT_BAL is the exception: its
values are multiples of 10,000 NT$ with a few odd ones (16,000, 327,680...), so no two differ by one
unit; its scale comes from its known minimum and maximum (10,000 and 1,000,000).  Checks, each
printed: every value's distance from its grid point (in units; rounding to six decimals allows a
few hundredths for the amounts), z-scoring the recovered integers again gives FATE's values back
to the six decimals, every other column's recovered maximum equals UCI's, and the rows with ids 1
and 2 equal UCI's rows 1 and 2 (FATE kept UCI's ids).
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: The issue's goals (issue 19): test AUC from any start, its spread over starts, the loss's relative gap
#: to the optimum and the passes it may take beyond the number of weights.
GOAL_AUC, GOAL_SPREAD, GOAL_GAP, GOAL_EXTRA_PASSES = 0.709, 0.002, 1e-6, 10

#: FATE's default_credit files, column by column: (FATE party, FATE column, UCI name, UCI minimum, UCI maximum).
#: FATE's guest is vfl's label party; its host the feature party.
UCI_COLUMNS = [
    ("host", "x0", "LIMIT_BAL", 10_000, 1_000_000),
    ("host", "x1", "SEX", 1, 2),
    ("host", "x2", "EDUCATION", 0, 6),
    ("host", "x3", "MARRIAGE", 0, 3),
    ("host", "x4", "AGE", 21, 79),
    ("host", "x5", "PAY_0", -2, 8),
    ("host", "x6", "PAY_2", -2, 8),
    ("host", "x7", "PAY_3", -2, 8),
    ("host", "x8", "PAY_4", -2, 8),
    ("host", "x9", "PAY_5", -2, 8),
    ("guest", "x0", "PAY_6", -2, 8),
    ("guest", "x1", "BILL_AMT1", -165_580, 964_511),
    ("guest", "x2", "BILL_AMT2", -69_777, 983_931),
    ("guest", "x3", "BILL_AMT3", -157_264, 1_664_089),
    ("guest", "x4", "BILL_AMT4", -170_000, 891_586),
    ("guest", "x5", "BILL_AMT5", -81_334, 927_171),
    ("guest", "x6", "BILL_AMT6", -339_603, 961_664),
    ("guest", "x7", "PAY_AMT1", 0, 873_552),
    ("guest", "x8", "PAY_AMT2", 0, 1_684_259),
    ("guest", "x9", "PAY_AMT3", 0, 896_040),
    ("guest", "x10", "PAY_AMT4", 0, 621_000),
    ("guest", "x11", "PAY_AMT5", 0, 426_529),
    ("guest", "x12", "PAY_AMT6", 0, 528_666),
]
#: Columns whose scale comes from their known minimum and maximum (no two values one unit apart).
SCALED_BY_RANGE = {"LIMIT_BAL"}
#: UCI's first two rows (ids 1 and 2), in the order of UCI_COLUMNS: a check of the recovery.
UCI_ROWS = {
    1: [20000, 2, 2, 1, 24, 2, 2, -1, -1, -2, -2, 3913, 3102, 689, 0, 0, 0, 0, 689, 0, 0, 0, 0],
    2: [120000, 2, 2, 2, 26, -1, 2, 0, 0, 0, 2, 2682, 1725, 2682, 3272, 3455, 3261, 0, 1000, 1000, 1000, 0, 2000],
}

NEEDS_DATA = ("--quality measures on FATE's copy of UCI's default_credit data: pass --data DIR, the folder holding "
              "default_credit_hetero_guest.csv and default_credit_hetero_host.csv (FATE's examples/data, "
              "https://github.com/FederatedAI/FATE/tree/master/examples/data; vfl does not ship them).")


# --------------------------------------------------------------------------- original units

def resolution(z: np.ndarray) -> float:
    """Half the last decimal the values were written with (``5e-7`` for six decimals)."""
    for decimals in range(16):
        scaled = np.asarray(z, dtype=np.float64) * 10.0 ** decimals
        if np.all(np.abs(scaled - np.round(scaled)) < 1e-3):
            return 0.5 * 10.0 ** -decimals
    return 0.0


def integer_grid(z: np.ndarray, half_ulp: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The distinct values ``v`` of ``z`` as ``v_0 + k u`` with integer ``k``: ``(v, k, u)``.

    Assumes the smallest gap between distinct values is one unit.  ``u`` starts as that gap, known
    to about ``2 half_ulp``.  A gap's ``k = round(gap / u)`` is certain while ``k`` times the
    uncertainty of ``u`` stays well under half a unit, so ``u`` is refitted by least squares over
    the certain gaps, which makes larger ones certain, until no more are added.  The longest run
    of values joined by certain gaps then has exact integer positions; a line fitted through them
    places the other values, those whose predicted position is certain first, refitted over all
    placed values until every value is placed.
    """
    v = np.unique(np.asarray(z, dtype=np.float64))
    if v.size < 2:
        raise ValueError("a constant column has no scale")
    gaps = np.diff(v)
    u, du, used = float(gaps.min()), 2.0 * half_ulp, -1
    while True:
        certain = gaps / u < 0.2 * u / max(du, 1e-300)
        if certain.sum() == used:
            break
        used = int(certain.sum())
        k = np.round(gaps[certain] / u)
        u = float(np.sum(k * gaps[certain]) / np.sum(k * k))
        du = 2.0 * half_ulp / math.sqrt(float(np.sum(k * k)))
    # the longest run of values joined by certain gaps: exact integer positions
    cuts = np.concatenate([[0], np.flatnonzero(~certain) + 1, [v.size]])
    longest = int(np.argmax(np.diff(cuts)))
    first, last = cuts[longest], cuts[longest + 1]
    placed = np.zeros(v.size, dtype=bool)
    placed[first:last] = True
    k = np.zeros(v.size)
    k[first + 1:last] = np.cumsum(np.round(gaps[first:last - 1] / u))
    while True:
        design = np.column_stack([k[placed], np.ones(int(placed.sum()))])
        (u, shift), *_ = np.linalg.lstsq(design, v[placed], rcond=None)
        mean_k, spread = float(k[placed].mean()), float(np.sum((k[placed] - k[placed].mean()) ** 2))
        position = (v - shift) / u
        predicted_sd = half_ulp * np.sqrt(1.0 / placed.sum() + (position - mean_k) ** 2 / max(spread, 1e-300))
        certain = (3.0 * predicted_sd + half_ulp) / abs(u) < 0.25
        if not np.any(certain & ~placed):
            break
        placed |= certain
        k[placed] = np.round(position[placed])
    k = np.round((v - shift) / u)
    return v, k - k[0], float(u)


@dataclass
class Recovered:
    """One column back in integers, and how well it fits."""

    values: np.ndarray
    unit: float                 # original units per z unit (the column's population std)
    max_deviation: float        # largest distance of a value from its grid point, in original units
    restandardized_error: float  # largest |z-score of the recovered integers - the given z|
    half_ulp: float


def recover_integers(z, minimum: int, maximum: int | None = None, name: str = "column") -> Recovered:
    """The integers a z-scored column came from, given its original minimum (and maximum, if its scale needs it).

    Without ``maximum`` the scale comes from the gaps between distinct values
    (:func:`integer_grid`); with it, from the range.  Raises ``ValueError`` naming the column
    when the values are not an integer grid or do not z-score back to ``z``.  Z-scores hide a
    whole-number factor of the scale (a column of even numbers z-scores like its halves): the
    caller checks the result against a known maximum or row, as :func:`original_units` does.
    """
    z = np.asarray(z, dtype=np.float64)
    half_ulp = resolution(z)
    if maximum is None:
        v, k, u = integer_grid(z, half_ulp)
        position = (v - v[0]) / u
    else:
        v = np.unique(z)
        u = (v[-1] - v[0]) / (maximum - minimum)
        position = (v - v[0]) / u
        k = np.round(position)
    # the distance of each value from its grid point, after fitting the grid's offset
    deviation = float(np.max(np.abs(position - k - np.mean(position - k))))
    values = (minimum + k[np.searchsorted(v, z)]).astype(np.int64)
    again = (values - values.mean()) / values.std()
    error = float(np.max(np.abs(again - z)))
    if deviation > 0.25 or error > 2.0 * half_ulp + 1e-9:
        how = "its known maximum too" if maximum is None else "the right minimum and maximum"
        raise ValueError(f"{name}: the values are not integers of one z-scored column (a value is {deviation:.2f} "
                         f"units off its grid point; re-standardized, {error:.2g} off); give {how}")
    return Recovered(values, 1.0 / u, deviation, error, half_ulp)


def original_units(guest: pd.DataFrame, host: pd.DataFrame) -> tuple[pd.DataFrame, list[list]]:
    """FATE's default_credit frames (aligned on ``id``) in UCI's original units, and a check table.

    Returns the frame (``id``, the 23 UCI columns, ``y``) and one row per column: FATE column,
    UCI name, recovered std, largest deviation from the grid, re-standardization error,
    recovered minimum and maximum, UCI's maximum.
    """
    guest = guest.sort_values("id").reset_index(drop=True)
    host = host.sort_values("id").reset_index(drop=True)
    if not np.array_equal(guest["id"].to_numpy(), host["id"].to_numpy()):
        raise ValueError("the guest and host files do not hold the same ids")
    frames = {"guest": guest, "host": host}
    out = pd.DataFrame({"id": guest["id"].to_numpy()})
    checks = []
    for party, column, name, low, high in UCI_COLUMNS:
        found = recover_integers(frames[party][column].to_numpy(), low, high if name in SCALED_BY_RANGE else None,
                                 name=f"{party} {column} ({name})")
        out[name] = found.values
        checks.append([f"{party} {column}", name, f"{found.unit:,.2f}", f"{found.max_deviation:.3f}",
                       f"{found.restandardized_error:.1e}", f"{found.values.min():,}", f"{found.values.max():,}",
                       f"{high:,}" + (" (used)" if name in SCALED_BY_RANGE else "")])
        if name not in SCALED_BY_RANGE and found.values.max() != high:
            raise ValueError(f"{name}: recovered maximum {found.values.max()} is not UCI's {high}")
    out["y"] = guest["y"].to_numpy()
    for row_id, expected in UCI_ROWS.items():
        got = out.loc[out["id"] == row_id, [c[2] for c in UCI_COLUMNS]].to_numpy().ravel().tolist()
        if got != expected:
            raise ValueError(f"row {row_id} recovered as {got}, UCI's is {expected}")
    return out, checks


# --------------------------------------------------------------------------- data, split, standardization

@dataclass
class Split:
    """Training and test rows of each party (original units), the labels (0/1), party order: features first."""

    name: str
    parties: dict            # party -> list of column names; the label party last
    train: pd.DataFrame
    test: pd.DataFrame

    @property
    def columns(self) -> list[str]:
        return [c for cols in self.parties.values() for c in cols]

    def standardized(self) -> tuple[list[np.ndarray], np.ndarray]:
        """Each party's training block and the test matrix, every column ``(x - mean) / std`` over the training rows."""
        x = self.train[self.columns].to_numpy(dtype=np.float64)
        mean, std = x.mean(axis=0), x.std(axis=0)
        if np.any(std == 0):
            raise ValueError(f"constant training columns: {[c for c, s in zip(self.columns, std) if s == 0]}")
        blocks, start = [], 0
        for cols in self.parties.values():
            blocks.append((x[:, start:start + len(cols)] - mean[start:start + len(cols)]) /
                          std[start:start + len(cols)])
            start += len(cols)
        test = (self.test[self.columns].to_numpy(dtype=np.float64) - mean) / std
        return blocks, test

    def labels(self, rows: pd.DataFrame) -> np.ndarray:
        """-1/+1, as the logistic objective takes them."""
        return np.where(rows["y"].to_numpy() == 1, 1.0, -1.0)

    def vertical(self, rows: pd.DataFrame, blocks: list[np.ndarray] | None = None):
        """A VerticalDataset of ``rows``: each party its columns (``blocks`` instead, if given), the label party ``y``."""
        from vfl import VerticalDataset

        frames = {}
        for i, (party, cols) in enumerate(self.parties.items()):
            frame = rows[["id"] + cols].reset_index(drop=True).copy()
            if blocks is not None:
                frame[cols] = blocks[i]
            frames[party] = frame
        label_party = list(self.parties)[-1]
        frames[label_party]["y"] = rows["y"].to_numpy()
        return VerticalDataset(frames, label="y", id_column="id")


def make_split(name: str, frame: pd.DataFrame, parties: dict, seed: int = 0) -> Split:
    """80/20, stratified on ``y``, fixed seed."""
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(frame, test_size=0.2, stratify=frame["y"], random_state=seed)
    return Split(name, parties, train.reset_index(drop=True), test.reset_index(drop=True))


def default_credit(data_dir: Path) -> tuple[Split, list[list], pd.DataFrame]:
    """FATE's default_credit in original units, split; the unit checks; FATE's own (z-scored, aligned) columns."""
    guest = pd.read_csv(Path(data_dir) / "default_credit_hetero_guest.csv")
    host = pd.read_csv(Path(data_dir) / "default_credit_hetero_host.csv")
    frame, checks = original_units(guest, host)
    parties = {p: [name for party, _, name, _, _ in UCI_COLUMNS if party == p] for p in ("host", "guest")}
    fate = pd.concat([host.sort_values("id").reset_index(drop=True).drop(columns="id").add_prefix("host_"),
                      guest.sort_values("id").reset_index(drop=True)], axis=1)
    return make_split("default_credit", frame, parties), checks, fate


def breast_cancer() -> Split:
    """scikit-learn's bundled breast-cancer data: 20 columns at A, 10 and the label (malignant = 1) at B."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer(as_frame=True)
    frame = data.data.copy()
    frame.insert(0, "id", np.arange(1, len(frame) + 1))
    frame["y"] = (data.target == 0).astype(int)
    names = list(data.data.columns)
    return make_split("breast_cancer", frame, {"A": names[:20], "B": names[20:]})


# --------------------------------------------------------------------------- the objective and its optimum

def objective_value(x, y, coef, intercept: float, settings) -> float:
    """vfl's objective at ``(coef, intercept)``: the mean per-row loss plus the settings' penalty."""
    from vfl.parties.objectives import get_objective

    z = np.asarray(x) @ np.asarray(coef) + intercept
    return float(np.mean(get_objective(settings.objective).loss(z, y))) + settings.penalty_spec.value(np.asarray(coef))


def taylor_optimum(x, y, alpha: float, fit_intercept: bool = True, objective: str = "logistic"):
    """The exact minimiser of ``(1/n) sum (a z^2 + b y z + c) + (alpha/2) ||w||^2``, intercept not penalised.

    The objective is quadratic: its gradient ``(1/n) A^T (2a z + b y) + alpha P theta`` vanishes at
    the solution of ``(2a/n A^T A + alpha P) theta = -(b/n) A^T y``, ``A = [X, 1]``.  Returns
    ``(coef, intercept, condition number of that matrix)``.
    """
    from vfl.parties.objectives import get_objective

    loss = get_objective(objective)
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    a = np.hstack([x, np.ones((n, 1))]) if fit_intercept else x
    penalty = np.full(a.shape[1], float(alpha))
    if fit_intercept:
        penalty[-1] = 0.0
    hessian = 2.0 * loss.a / n * (a.T @ a) + np.diag(penalty)
    theta = np.linalg.solve(hessian, -loss.b / n * (a.T @ y))
    coef, intercept = (theta[:-1], float(theta[-1])) if fit_intercept else (theta, 0.0)
    return coef, intercept, float(np.linalg.cond(hessian))


# --------------------------------------------------------------------------- the settings measured

def estimator_params() -> dict:
    """``VerticalLogisticRegression().get_params()``: today's parameters and defaults."""
    from vfl import VerticalLogisticRegression

    return VerticalLogisticRegression().get_params()


def first_order(params: dict) -> dict:
    """``params`` with the first-order solver where the estimator has a ``solver`` parameter."""
    return {**params, "solver": "gd"} if "solver" in estimator_params() else dict(params)


#: The settings before issue 19 (the estimator's defaults until then).
OLD_DEFAULTS = dict(learning_rate=0.15, max_iter=30, optimizer="sgd", batch_size=None, alpha=0.01, tol=1e-4,
                    init="random")
#: FATE's examples/benchmark_quality/lr/default_credit_config.yaml in vfl's terms (docs/fate_comparison.md).
#: (FATE starts from zero; vfl asks insecure=True to acknowledge what that start reveals, as it does here.)
FATE_CONFIG = dict(optimizer="rmsprop", learning_rate=0.12 * 0.7, alpha=0.1, batch_size=10_000, max_iter=16,
                   init="zeros", insecure=True, tol=None)


def setting_rows(dataset: str) -> list[tuple[str, dict, int | None]]:
    """(label, estimator parameters, most runs) of each row measured; the first is the estimator's defaults.

    The 1000-iteration row is slow (about a second per 40 epochs of 24,000 rows here) and, being
    about convergence, varies little with the start: five runs at most.
    """
    rows = [("defaults: VerticalLogisticRegression()", {}, None),
            ("before issue 19: sgd, lr 0.15, max_iter 30, tol 1e-4", first_order(OLD_DEFAULTS), None),
            ("same, 1000 iterations (tol None)", first_order({**OLD_DEFAULTS, "max_iter": 1000, "tol": None}), 5)]
    if dataset == "default_credit":
        rows += [("FATE's config: rmsprop rho 0.9, lr 0.084, alpha 0.1, batch 10000, 16 epochs",
                  first_order({**FATE_CONFIG, "rho": 0.9}), None),
                 ("FATE's config, rho 0.99", first_order({**FATE_CONFIG, "rho": 0.99}), None),
                 ("FATE's config, rho 0.99, 200 epochs",
                  first_order({**FATE_CONFIG, "rho": 0.99, "max_iter": 200}), None)]
    return rows


def describe_defaults() -> str:
    """The defaults that decide quality, as ``name=value``."""
    params = estimator_params()
    keys = ["solver", "standardize", "optimizer", "learning_rate", "max_iter", "tol", "alpha", "penalty",
            "batch_size", "init", "packing", "rho"]
    return ", ".join(f"{k}={params[k]!r}" for k in keys if k in params)


# --------------------------------------------------------------------------- runs

def party_start(blocks: list[np.ndarray], y: np.ndarray, settings) -> tuple[np.ndarray, float]:
    """A start of the kind the parties draw, each party for its own columns (label party last), from the CSPRNG."""
    from vfl.centralized import random_start

    if settings.init == "zeros":
        return np.zeros(sum(b.shape[1] for b in blocks)), 0.0
    coef = np.concatenate([random_start(b, y, settings)[0] for b in blocks])
    return coef, random_start(blocks[-1], y, settings)[1] if settings.fit_intercept else 0.0


def settings_of(params: dict):
    """The training settings the estimator builds from ``params``: the object the parties share."""
    from vfl import VerticalLogisticRegression

    return VerticalLogisticRegression(**params)._settings()


def centralized_runs(split: Split, params: dict, runs: int, optimum: dict) -> dict:
    """``runs`` trainings from fresh random starts (and batch orders, seeds 0, 1, ...): their figures."""
    from sklearn.metrics import roc_auc_score

    from vfl.centralized import fit_gradient_descent
    from vfl.errors import DivergenceError

    settings = settings_of(params)
    blocks, x_test = split.standardized()
    x, y, y_test = np.hstack(blocks), split.labels(split.train), split.labels(split.test)
    best = optimum_of(split, settings, optimum)
    figures = {"auc": [], "passes": [], "gap": [], "error": None, "optimum_loss": best["loss"]}
    for run in range(runs):
        try:
            result = fit_gradient_descent(x, y, settings, seed=run, start=party_start(blocks, y, settings))
        except DivergenceError as error:
            figures["error"] = str(error)
            break
        figures["auc"].append(float(roc_auc_score(y_test, x_test @ result["coef"] + result["intercept"])))
        figures["passes"].append(int(result["n_iter"]))
        loss = objective_value(x, y, result["coef"], result["intercept"], settings)
        figures["gap"].append((loss - best["loss"]) / best["loss"])
    return figures


def optimum_of(split: Split, settings, cache: dict) -> dict:
    """The exact optimum of the settings' objective on the split's standardized training rows (cached by alpha)."""
    from sklearn.metrics import roc_auc_score

    alpha = 0.0 if settings.penalty == "none" else settings.alpha
    if settings.penalty not in ("l2", "none"):
        raise ValueError(f"the closed-form optimum covers the l2 and none penalties, not {settings.penalty!r}")
    if alpha not in cache:
        blocks, x_test = split.standardized()
        x, y = np.hstack(blocks), split.labels(split.train)
        coef, intercept, condition = taylor_optimum(x, y, alpha, settings.fit_intercept, settings.objective)
        cache[alpha] = {"coef": coef, "intercept": intercept, "condition": condition,
                        "loss": objective_value(x, y, coef, intercept, settings),
                        "auc": float(roc_auc_score(split.labels(split.test), x_test @ coef + intercept))}
    return cache[alpha]


def scikit_learn(split: Split) -> dict:
    """Test AUC of ``LogisticRegression()`` on standardized columns (a pipeline) and on the raw columns."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out = {}
    for name, model in (("standardized", make_pipeline(StandardScaler(), LogisticRegression())),
                        ("raw", LogisticRegression())):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model.fit(split.train[split.columns], split.train["y"])
        proba = model.predict_proba(split.test[split.columns])[:, 1]
        out[name] = {"auc": float(roc_auc_score(split.test["y"], proba)),
                     "converged": not any(issubclass(w.category, ConvergenceWarning) for w in caught)}
    return out


def federated_run(split: Split, params: dict, key_bits: int, load) -> dict:
    """One real federated training (all parties in this process, as the estimator runs them), checked centrally.

    Packing is on (the same model bit for bit, faster).  With ``standardize`` in the estimator's
    parameters the parties get the original units and standardize themselves; otherwise the
    bench standardizes the columns first.  The run is then replayed by
    :func:`~vfl.centralized.fit_gradient_descent` from the start its parties drew (read in
    standardized units, or converted from original units, whichever gives the run's first loss).
    """
    from sklearn.metrics import roc_auc_score

    from vfl import VerticalLogisticRegression
    from vfl.centralized import fit_gradient_descent

    inside = "standardize" in estimator_params()
    blocks, x_test = split.standardized()
    x, y = np.hstack(blocks), split.labels(split.train)
    train = split.vertical(split.train, None if inside else blocks)
    test_blocks = np.split(x_test, np.cumsum([len(c) for c in split.parties.values()])[:-1], axis=1)
    test = split.vertical(split.test, None if inside else test_blocks)
    model = VerticalLogisticRegression(**{**params, "key_bits": key_bits, "insecure": key_bits < 2048,
                                          "packing": True})
    before, started = load(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # max_iter reached: reported as converged_ below
        model.fit(train)
    fit_seconds = time.perf_counter() - started
    auc = float(roc_auc_score(split.test["y"], model.predict_proba(test)))
    figures = {"key_bits": key_bits, "auc": auc, "passes": int(model.n_iter_), "converged": bool(model.converged_),
               "fit_seconds": fit_seconds,
               "load_before": before, "load_after": load(), "loss_curve": np.asarray(model.loss_curve_)}
    parties = list(split.parties)
    coef0 = np.concatenate([np.atleast_1d(model.initial_coef_[p]) for p in parties])
    b0 = float(model.initial_intercept_)
    raw = split.train[split.columns].to_numpy(dtype=np.float64)
    mean, std = raw.mean(axis=0), raw.std(axis=0)
    settings = settings_of({**params, "key_bits": key_bits, "insecure": key_bits < 2048})
    candidates = {"standardized": (coef0, b0), "original": (coef0 * std, b0 + float(coef0 @ mean))}
    first = {k: objective_value(x, y, c, b, settings) for k, (c, b) in candidates.items()}
    units = min(first, key=lambda k: abs(first[k] - figures["loss_curve"][0]))
    replay = fit_gradient_descent(x, y, settings, seed=settings.random_state or 0, start=candidates[units])
    curve = np.asarray(replay["loss_curve"])
    common = min(len(curve), len(figures["loss_curve"]))
    figures.update(start_units=units, replay_passes=int(replay["n_iter"]),
                   replay_auc=float(roc_auc_score(split.test["y"], x_test @ replay["coef"] + replay["intercept"])),
                   curve_difference=float(np.max(np.abs(curve[:common] - figures["loss_curve"][:common]) /
                                                 np.abs(curve[:common]))),
                   replay_loss=objective_value(x, y, replay["coef"], replay["intercept"], settings))
    return figures


def raw_federated_error(split: Split, key_bits: int) -> str:
    """What the estimator does today on the columns in original units (no standardization): its error, if any."""
    from vfl import VerticalLogisticRegression

    model = VerticalLogisticRegression(**{**OLD_DEFAULTS, "key_bits": key_bits, "insecure": key_bits < 2048})
    started = time.perf_counter()
    try:
        model.fit(split.vertical(split.train))
    except Exception as error:      # the point is to report whatever it is
        return f"{type(error).__name__} after {time.perf_counter() - started:.0f} s: {error}"
    return f"no error: trained {model.n_iter_} epochs in {time.perf_counter() - started:.0f} s"


# --------------------------------------------------------------------------- goals and tables

def goal_lines(figures: dict, n_weights: int, with_auc: bool = True) -> list[str]:
    """The issue's goals for a row's runs, each ``met`` or ``missed`` with its figure."""
    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    if figures.get("error") or not figures["auc"]:
        return [f"goals: not measurable, training failed: {figures.get('error')}"]
    lines = []
    low, high = min(figures["auc"]), max(figures["auc"])
    if with_auc:
        lines.append(f"goal test AUC >= {GOAL_AUC} from any start: {verdict(low >= GOAL_AUC)} "
                     f"(lowest {low:.4f} over {len(figures['auc'])} starts)")
    lines.append(f"goal spread <= {GOAL_SPREAD} over starts: {verdict(high - low <= GOAL_SPREAD)} "
                 f"(max - min = {high - low:.4f})")
    limit, gap, passes = n_weights + GOAL_EXTRA_PASSES, max(figures["gap"]), max(figures["passes"])
    lines.append(f"goal loss within {GOAL_GAP:g} relative of the optimum in <= {limit} passes ({n_weights} weights "
                 f"+ {GOAL_EXTRA_PASSES}): {verdict(gap <= GOAL_GAP and passes <= limit)} "
                 f"(largest gap {gap:.2e}, most passes {passes})")
    return lines


def _range(values, fmt: str) -> str:
    return "-" if not values else f"{min(values):{fmt}} / {statistics.median(values):{fmt}} / {max(values):{fmt}}"


def quality_table(sk: dict, optima: dict, rows: list[tuple[str, dict]], table) -> str:
    """One line per reference and per setting row; the settings in the first column."""
    header = ["settings", "runs", "test AUC min / median / max", "spread", "passes min / median / max",
              "loss gap to optimum min / median / max"]
    body = [["scikit-learn LogisticRegression(), StandardScaler pipeline", "exact", f"{sk['standardized']['auc']:.4f}",
             "-", "-", "-"],
            ["scikit-learn LogisticRegression(), raw columns" +
             ("" if sk["raw"]["converged"] else " (ConvergenceWarning)"), "exact", f"{sk['raw']['auc']:.4f}", "-", "-",
             "-"]]
    for alpha, best in sorted(optima.items()):
        body.append([f"optimum of vfl's Taylor objective, alpha {alpha:.3g} (closed form)", "exact",
                     f"{best['auc']:.4f}", "-", "-", f"0 (loss {best['loss']:.8f})"])
    for label, figures in rows:
        if figures.get("error"):
            body.append([label, "-", f"fails: {figures['error']}", "-", "-", "-"])
            continue
        auc = figures["auc"]
        body.append([label, len(auc), _range(auc, ".4f"), f"{max(auc) - min(auc):.4f}",
                     _range(figures["passes"], "g"), _range(figures["gap"], ".1e")])
    return table(body, header)


# --------------------------------------------------------------------------- the FATE setting

def fate_setting(fate: pd.DataFrame, runs: int, table) -> str:
    """docs/fate_comparison.md's default_credit setting (all 30,000 rows, FATE's z-scored columns, train AUC)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from vfl.centralized import fit_gradient_descent

    columns = [c for c in fate.columns if c not in ("id", "y")]
    x, y = fate[columns].to_numpy(dtype=np.float64), np.where(fate["y"].to_numpy() == 1, 1.0, -1.0)
    settings = settings_of(first_order(FATE_CONFIG))
    coef, intercept, _ = taylor_optimum(x, y, settings.alpha)
    best = objective_value(x, y, coef, intercept, settings)
    sk = LogisticRegression().fit(x, y)
    weak, weak_intercept, _ = taylor_optimum(x, y, 1.0 / len(y))
    body = [["FATE 2.2, measured 2026-11-23 (docs/fate_comparison.md, not re-run)", "1", "0.7128", "-", "-"],
            ["scikit-learn LogisticRegression()", "exact", f"{roc_auc_score(y, sk.decision_function(x)):.4f}", "-", "-"],
            ["optimum of vfl's Taylor objective, alpha 1/n (scikit-learn's C=1)", "exact",
             f"{roc_auc_score(y, x @ weak + weak_intercept):.4f}", "-", "-"],
            ["optimum of vfl's Taylor objective, alpha 0.1", "exact", f"{roc_auc_score(y, x @ coef + intercept):.4f}",
             "-", f"0 (loss {best:.6f})"]]
    variants = [("rho 0.9 (vfl before 1f96244)", {"rho": 0.9}), ("rho 0.99 (torch's, FATE's)", {"rho": 0.99}),
                ("rho 0.99, lr 0.0845 (FATE's warm-up at its end)", {"rho": 0.99, "learning_rate": 0.12 * 0.7045}),
                ("rho 0.9, 200 epochs", {"rho": 0.9, "max_iter": 200}),
                ("rho 0.99, 200 epochs", {"rho": 0.99, "max_iter": 200})]
    for label, change in variants:
        settings = settings_of(first_order({**FATE_CONFIG, **change}))
        aucs, gaps = [], []
        for seed in range(runs):
            result = fit_gradient_descent(x, y, settings, seed=seed, start=(np.zeros(x.shape[1]), 0.0))
            aucs.append(float(roc_auc_score(y, x @ result["coef"] + result["intercept"])))
            gaps.append((objective_value(x, y, result["coef"], result["intercept"], settings) - best) / best)
        body.append([f"vfl, FATE's config, {label}", f"{runs} batch orders",
                     f"{aucs[0]:.4f} (order 0); {_range(aucs, '.4f')}", f"{max(aucs) - min(aucs):.4f}",
                     _range(gaps, ".1e")])
    return table(body, ["settings", "runs", "train AUC (batch order 0); min / median / max", "spread",
                        "loss gap to optimum min / median / max"])


# --------------------------------------------------------------------------- the command

def main_quality(args, machine, load, table) -> dict:
    """Everything above, printed; returns the figures (for ``--json``)."""
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB; Python {info['python']}")
    print(f"load average at start: {load()}")
    report: dict = {"machine": info, "load_start": load()}
    fate = None
    if args.data:
        split, checks, fate = default_credit(Path(args.data))
        print(f"\ndefault_credit in original units (from FATE's z-scored columns; method: benchmarks/quality.py):")
        print(table(checks, ["FATE column", "UCI column", "recovered std", "max off grid (units)",
                             "re-standardized max error", "min", "max", "UCI max"]))
        print(f"rows with ids {sorted(UCI_ROWS)} equal UCI's; every value an integer")
    else:
        print("\n" + NEEDS_DATA + "\nMeanwhile, the same report on scikit-learn's bundled breast-cancer data.")
        split = breast_cancer()
    n_weights = len(split.columns) + 1
    print(f"\n{split.name}: {len(split.train)} training rows, {len(split.test)} test rows (80/20, stratified, seed 0); "
          f"parties {', '.join(f'{p} {len(c)} columns' for p, c in split.parties.items())}; {n_weights} weights "
          f"with the intercept; {args.runs} runs per setting (centralized, same settings object)")
    print(f"defaults now: {describe_defaults()}")
    sk, optima = scikit_learn(split), {}
    # the Taylor objective at scikit-learn's penalty (C=1 is alpha = 1/n): what the approximation alone costs
    optimum_of(split, settings_of({"alpha": 1.0 / len(split.train)}), optima)
    rows = []
    for label, params, most in setting_rows(split.name):
        figures = centralized_runs(split, params, min(args.runs, most or args.runs), optima)
        rows.append((label, figures))
    print("\nModel quality (test AUC, 80/20 split)")
    print(quality_table(sk, optima, rows, table))
    defaults = settings_of({})
    print(f"condition number of the objective's Hessian at the defaults' alpha {defaults.alpha:g}: "
          f"{optimum_of(split, defaults, optima)['condition']:.0f}")
    print("goals (issue 19), defaults row:")
    for line in goal_lines(rows[0][1], n_weights, with_auc=split.name == "default_credit"):
        print("  " + line)
    report.update(dataset=split.name, scikit_learn=sk, rows=[{"settings": l, **f} for l, f in rows],
                  optima={str(a): {k: v for k, v in o.items() if k not in ("coef",)} for a, o in optima.items()})
    if fate is not None:
        orders = min(args.runs, 10)
        print("\ndocs/fate_comparison.md's default_credit setting: all 30,000 rows, FATE's z-scored columns, "
              f"train AUC, zero start, batch orders 0..{orders - 1}")
        print(fate_setting(fate, orders, table))
    if "standardize" not in estimator_params():
        print("\nthe estimator on the raw columns (original units, no standardization), old defaults, "
              "1024-bit keys:")
        report["raw_error"] = raw_federated_error(split, 1024) if args.federated else "not run (--federated 0)"
        print("  " + report["raw_error"])
    runs = [1024] * args.federated + [2048] * args.federated_2048
    if runs:
        print(f"\nfederated runs of the defaults (VerticalLogisticRegression, packing=True; 1024-bit keys with "
              f"insecure=True for speed, 2048-bit as used): each replayed centrally from its parties' start")
        federated = [federated_run(split, {}, bits, load) for bits in runs]
        best = optimum_of(split, settings_of({}), optima)["loss"]
        body = [[f["key_bits"], f"{f['auc']:.6f}", f"{f['replay_auc']:.6f}", f"{f['passes']} / {f['replay_passes']}", "yes" if f["converged"] else "no",
                 f"{f['curve_difference']:.1e}", f"{(f['replay_loss'] - best) / best:.1e}", f"{f['fit_seconds']:.0f}",
                 f"{f['load_before']} / {f['load_after']}"] for f in federated]
        print(table(body, ["key bits", "test AUC", "replayed centrally", "passes fed. / replay",
                           "converged_", "loss curves max rel. diff.", "final loss gap (replay)", "fit s", "load before / after"]))
        report["federated"] = [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in f.items()}
                               for f in federated]
    print(f"\nload average at end: {load()}")
    return report
