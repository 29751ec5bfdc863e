"""The model-quality figures docs/trees.md quotes: vfl's trees beside XGBoost's ``hist`` method on the same bins.

    python examples/trees_against_xgboost.py --data DIR     # DIR: FATE's breast and default_credit hetero CSVs

Prints, for every figure the docs quote, the training AUC of vfl's boosting (the
pooled reference :func:`vfl.centralized.trees.fit_boosting`, which the federated
runs equal split for split, tested) and of XGBoost given the same bin codes as its
features (so the cut points are the same), the same depth, learning rate, λ and
``min_child_weight``.  Without ``--data`` the FATE rows are skipped (scikit-learn's
digits run from a fresh clone).

Multi-class: vfl's trees use the softmax hessian ``p(1-p)``; XGBoost's
``multi:softprob`` uses ``2p(1-p)`` (a bound that keeps its Newton steps
conservative).  The script prints XGBoost both ways — native, and with ``p(1-p)``
through a custom objective — so the gap against native XGBoost is seen to be the
hessian's factor 2 and nothing else.  Needs ``xgboost`` (in the ``test`` extra).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from vfl.cli import run_script

#: docs/trees.md's settings: 32 bins, depth 3, learning rate 0.3, λ = 0.1, min_child_weight 1, no early stopping,
#: every tree open to every party's columns (XGBoost has no label_party_trees).
SETTINGS = dict(max_bins=32, max_depth=3, learning_rate=0.3, l2_regularization=0.1, min_child_weight=1.0,
                min_samples_leaf=1, early_stopping=False, label_party_trees=0)


def binned(tables):
    """Each party's columns binned by itself (vfl's ``Binner``), in the data parties' order (label party last)."""
    from vfl.parties.binning import Binner

    binners = [Binner(SETTINGS["max_bins"]).fit(t) for t in tables]
    return [b.transform(t) for b, t in zip(binners, tables)], binners


def vfl_raw(codes, binners, y, iterations: int, n_classes: int | None = None) -> np.ndarray:
    """The training raw scores of vfl's boosting on the pooled bins (what the federated run gives)."""
    from vfl.centralized.trees import fit_boosting
    from vfl.protocols.trees import BoostingSettings

    settings = BoostingSettings(max_iter=iterations, insecure=True, key_bits=1024, **SETTINGS)
    return fit_boosting(codes, binners, y, settings, n_classes, seed=0)


def vfl_scores(model, codes, binners) -> np.ndarray:
    """The raw scores of rows ``codes`` (binned by the training binners) under the pooled model."""
    from vfl.centralized.trees import tree_leaves

    raw = np.tile(model.baseline, (len(codes[0]), 1))
    for trees, splits in zip(model.trees, model.splits):
        for k, (tree, split_of) in enumerate(zip(trees, splits)):
            raw[:, k] += tree.value[tree.leaves][tree_leaves(tree, split_of, codes, binners)]
    return raw


def xgb_margins(codes, binners, y, iterations: int, baseline, n_classes: int | None = None,
                vfl_hessian: bool = False, scored=None) -> np.ndarray:
    """XGBoost ``hist`` on the same bin codes (a missing value's code as NaN); margins of ``scored`` (default: the
    training rows)."""
    import xgboost as xgb

    def matrix(rows, labels=None):
        x = np.hstack([c.astype(float) for c in rows])
        missing = np.hstack([np.full(c.shape[1], b.missing_code) for c, b in zip(rows, binners)])
        x[x == missing] = np.nan
        m = xgb.DMatrix(x, label=labels)
        n = len(x)
        m.set_base_margin(np.tile(baseline, (n, 1)).ravel() if n_classes else np.full(n, baseline[0]))
        return m

    params = {"tree_method": "hist", "max_bin": 256, "max_depth": SETTINGS["max_depth"],
              "eta": SETTINGS["learning_rate"], "lambda": SETTINGS["l2_regularization"],
              "min_child_weight": SETTINGS["min_child_weight"]}
    obj = None
    if n_classes:
        params.update(num_class=n_classes, objective="multi:softprob")
        if vfl_hessian:
            def obj(margin, data):          # softmax log loss with vfl's hessian p(1-p)
                p = np.exp(margin - margin.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                onehot = np.eye(n_classes)[data.get_label().astype(int)]
                return p - onehot, p * (1 - p)
    else:
        params["objective"] = "binary:logistic"
    booster = xgb.train(params, matrix(codes, y), num_boost_round=iterations, obj=obj)
    return booster.predict(matrix(scored if scored is not None else codes), output_margin=True)


def auc(y, raw, n_classes=None) -> float:
    from sklearn.metrics import roc_auc_score

    if n_classes:
        p = np.exp(raw - raw.max(axis=1, keepdims=True))
        return float(roc_auc_score(y, p / p.sum(axis=1, keepdims=True), multi_class="ovr"))
    return float(roc_auc_score(y, np.ravel(raw)))


def fate(data_dir: Path, name: str):
    """FATE's hetero files: (host's columns, guest's columns), the labels."""
    import pandas as pd

    guest = pd.read_csv(data_dir / f"{name}_hetero_guest.csv").sort_values("id")
    host = pd.read_csv(data_dir / f"{name}_hetero_host.csv").set_index("id").loc[guest["id"]]
    return [host.to_numpy(float), guest.drop(columns=["id", "y"]).to_numpy(float)], guest["y"].to_numpy()


def binary_line(label: str, tables, y, iterations: int) -> None:
    codes, binners = binned(tables)
    model = vfl_raw(codes, binners, y, iterations, n_classes=2)
    ours = auc(y, model.raw[:, 0])
    theirs = auc(y, xgb_margins(codes, binners, y, iterations, model.baseline))
    print(f"{label:<34} vfl {ours:.5f}   XGBoost {theirs:.5f}   difference {abs(ours - theirs):.5f}")


def digits_line(iterations: int) -> None:
    """Multi-class: AUC (one-vs-rest, macro) on held-out rows, the training AUC being 1 for all."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    train, test = train_test_split(np.arange(len(y)), test_size=0.3, random_state=0, stratify=y)
    halves = [slice(0, 32), slice(32, 64)]    # a feature party with the top half of each image, the label party
    codes, binners = binned([x[train][:, h] for h in halves])
    held = [b.transform(x[test][:, h]) for b, h in zip(binners, halves)]
    model = vfl_raw(codes, binners, y[train], iterations, n_classes=10)
    ours = auc(y[test], vfl_scores(model, held, binners), 10)
    native, same = (auc(y[test], xgb_margins(codes, binners, y[train], iterations, model.baseline, 10, flag, held), 10)
                    for flag in (False, True))
    print(f"{'digits, held-out 30%, ' + str(iterations) + ' trees a class':<34} vfl {ours:.5f}   "
          f"XGBoost {native:.5f} (hessian 2p(1-p); difference {abs(ours - native):.5f})   "
          f"XGBoost with p(1-p) {same:.5f} (difference {abs(ours - same):.5f})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="folder of FATE's *_hetero_guest/host.csv files")
    args = parser.parse_args(argv)
    print("training AUC, " + ", ".join(f"{k} {v}" for k, v in SETTINGS.items()))
    if args.data is not None:
        breast, y = fate(args.data, "breast")
        binary_line("breast, 5 trees", breast, y, 5)
        credit, y = fate(args.data, "default_credit")
        binary_line("default_credit, 3 trees", credit, y, 3)
        binary_line("default_credit, 50 trees", credit, y, 50)
    digits_line(10)


if __name__ == "__main__":
    raise SystemExit(run_script(main))
