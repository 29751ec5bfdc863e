"""The credit-scoring pipeline across a bank and a telco: WOE/IV, selection, a scorecard — the private way.

A bank holds its customers' income, credit utilisation, age and whether they
defaulted; a telco holds call counts, tenure and a column of noise.  The data
are generated here, with a **planted informative column at the telco**
(``calls``: more calls, more defaults) that the bank cannot see, and written as
each party's own raw CSV (``bank.csv``, ``telco.csv``, and ``*_new.csv`` to
score): each party has customers the other lacks, each in its own order.  The
script reads them back as the parties would and runs:

0. the private set intersection of the two parties' ids (vfl.psi);
1. each party bins its own columns (the bank monotonically, with its labels);
2. WOE and IV of every column: the bank encrypts its labels, the telco returns
   encrypted event counts per bin in a shuffled order (vfl.protocols.credit.woe);
3. selection by IV and a correlation bound (the Pearson between the parties'
   columns computed under encryption);
4. logistic regression on the coded bins (the bank's WOE values, the telco's bin
   indicators: it is not given its WOE values), with the coordinator;
5. the scorecard: points per bin, each party its own.

It prints the IV ranking (the planted column first), each party's points, and
the scorecard's AUC and KS on the new rows beside a centralized scorecard
(scikit-learn's logistic regression on the pooled table's WOE values, same bins).

    python examples/credit_pipeline.py                    # 2048-bit keys
    python examples/credit_pipeline.py --key-bits 1024    # quicker (insecure key: the same arithmetic)
    python examples/credit_pipeline.py --data credit --federation   # keep the CSVs in credit/, with the
                                                          # certificates and federation.toml for vfl party

With ``--federation`` it also writes ``certs/`` and ``federation.toml`` (a
``[pipeline]`` table; three parties on 127.0.0.1) into the data folder and
prints the commands that run the same pipeline as one process per party.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

import vfl.psi
from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.metrics import ks_statistic
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE
from vfl.cli import run_script


def make_customers(n_rows: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The telco's and the bank's tables (same customers, ids ``c00000``...); the bank's holds ``default``."""
    rng = np.random.default_rng(seed)
    income = rng.lognormal(10, 0.5, n_rows)
    utilisation = rng.beta(2, 5, n_rows)
    age = rng.integers(20, 70, n_rows).astype(float)
    calls = rng.poisson(3, n_rows) + rng.normal(scale=0.3, size=n_rows)       # the planted column
    tenure = rng.exponential(3, n_rows)
    noise = rng.normal(size=n_rows)
    logit = (-1.5 - 0.6 * np.log(income / 20000) + 2.0 * utilisation - 0.01 * (age - 40) + 0.6 * (calls - 3)
             - 0.15 * np.log1p(tenure))
    default = (rng.random(n_rows) < 1 / (1 + np.exp(-logit))).astype(int)
    calls[rng.random(n_rows) < 0.08] = np.nan                                   # gaps: a bin of their own
    ids = [f"c{i:05d}" for i in range(n_rows)]
    telco = pd.DataFrame({"id": ids, "calls": calls, "tenure": tenure, "noise": noise})
    bank = pd.DataFrame({"id": ids, "income": income, "utilisation": utilisation, "age": age, "default": default})
    return telco, bank


def write_csvs(folder: Path, rows: int, seed: int = 0) -> dict[str, Path]:
    """Each party's own raw CSVs: ``NAME.csv`` to train on and ``NAME_new.csv`` to score (3 for every 7).

    Every party misses about 5% of the other's customers and lists its own in its own order, as two
    organisations' exports would; the bank's files hold ``default``.
    """
    rng = np.random.default_rng(seed + 1)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for suffix, n, offset in (("", rows, 0), ("_new", max(rows * 3 // 7, 50), 1_000)):
        telco, bank = make_customers(n, seed + offset)
        ids = [f"{'n' if suffix else 'c'}{i:05d}" for i in range(n)]
        for name, frame in (("telco", telco), ("bank", bank)):
            own = frame.assign(id=ids)[rng.random(n) > 0.05]
            path = folder / f"{name}{suffix}.csv"
            own.iloc[rng.permutation(len(own))].to_csv(path, index=False)
            paths[name + suffix] = path
    return paths


def write_federation(folder: Path, key_bits: int) -> Path:
    """Certificates and a ``federation.toml`` with a ``[pipeline]`` table for telco, bank and a hub on 127.0.0.1."""
    from vfl.deploy.config import write_config
    from vfl.transport.tls import write_federation_certs

    roles = {"telco": "feature", "bank": "label", "hub": "coordinator"}
    tls = write_federation_certs(folder / "certs", tuple(roles))
    parties = {name: {"role": role, "address": f"127.0.0.1:{9741 + i}", "certificate": tls[name].certificate,
                      "key": tls[name].key} for i, (name, role) in enumerate(roles.items())}
    parties["telco"]["allow_reconstruction"] = True     # telco accepts that its part of a score names its bins
    training = {"model": "logistic", "iterations": 30, "key_bits": key_bits, "insecure": key_bits < 2048}
    pipeline = {"max_bins": 8, "iv_threshold": 0.02, "max_correlation": 0.8, "base_score": 600,
                "base_odds": 50, "pdo": 20}
    return write_config(folder / "federation.toml", tls["bank"].ca, parties, training,
                        {"connect_timeout": 60, "timeout": 3600}, label="default", pipeline=pipeline)


def read_aligned(paths: dict[str, Path], suffix: str = "") -> VerticalDataset:
    """The parties' raw CSVs read as each would read its own, aligned by private set intersection."""
    frames = {name: pd.read_csv(paths[name + suffix], dtype={"id": str}) for name in ("telco", "bank")}
    aligned = vfl.psi.intersect(frames, id_column="id", label="default")
    return VerticalDataset(aligned, label="default", id_column="id")


def pipeline(key_bits: int, max_bins: int = 8) -> VerticalPipeline:
    insecure = key_bits < 2048
    return VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(max_bins=max_bins), key_bits=key_bits, insecure=insecure)),
        ("selection", VerticalSelection(iv_threshold=0.02, max_correlation=0.8)),
        # telco's part of each score is one value per cell of its bins, so the bank, knowing some of telco's
        # customers, names every other row's bins (docs/credit_scoring.md): telco's release check refuses that
        # unless telco accepts it, as it does here (release_epsilon=... adds DP noise instead, at a price in AUC)
        ("scorecard", VerticalScorecard(VerticalLogisticRegression(key_bits=key_bits, insecure=insecure,
                                                                   allow_reconstruction=["telco"]),
                                        base_score=600, base_odds=50, pdo=20)),
    ])


def centralized_scorecard(woe: VerticalWOE, train: VerticalDataset, test: VerticalDataset, selected: dict):
    """Scikit-learn's logistic regression on the pooled table's WOE values of the same bins and columns."""
    def pooled(data):
        coded = woe.transform_woe(data)
        return np.column_stack([coded.features(p)[:, [coded.columns(p).index(c) for c in selected[p]]]
                                for p in coded.parties if selected[p]])

    model = LogisticRegression(C=100.0, max_iter=1000).fit(pooled(train), train.labels)
    return model.decision_function(pooled(test))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--rows", type=int, default=6000, help="customers of each party's training CSV")
    parser.add_argument("--data", metavar="DIR", default=None,
                        help="write the parties' CSVs into DIR and keep them (default: a temporary folder)")
    parser.add_argument("--federation", action="store_true",
                        help="also write certificates and federation.toml into --data, for vfl party / vfl predict")
    args = parser.parse_args(argv)
    if args.federation and args.data is None:
        parser.error("--federation needs --data DIR (the folder to keep the CSVs, certificates and federation.toml)")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.data or scratch).resolve()
        paths = write_csvs(folder, args.rows)
        if args.federation:
            config = write_federation(folder, args.key_bits)
            print(f"wrote {config} and the certificates; the same pipeline, one process per party "
                  f"(each in its own terminal, from {folder}):")
            for role, data in (("telco", "telco.csv"), ("bank", "bank.csv"), ("hub", None)):
                print(f"  vfl party --config federation.toml --role {role} --workdir run/{role}"
                      + (f" --data {data}" if data else ""))
            print("  then vfl predict likewise, with telco_new.csv and bank_new.csv\n")
        train = read_aligned(paths)
        test = read_aligned(paths, "_new")
    return run(args, train, test)


def run(args, train: VerticalDataset, test: VerticalDataset) -> dict:
    """Fit the pipeline on ``train``, print what each party holds, score ``test`` beside the centralized scorecard."""
    started = time.perf_counter()
    fitted = pipeline(args.key_bits).fit(train)
    seconds = time.perf_counter() - started
    woe, selection, card = (fitted.named_steps[k] for k in ("woe", "selection", "scorecard"))

    print(f"{train.n_rows:,} customers in both parties' training CSVs, {test.n_rows:,} in both new ones, "
          f"{np.mean(train.labels == 1):.1%} defaults; {args.key_bits}-bit keys; the pipeline took "
          f"{seconds:.1f} s\n")
    ranking = sorted(((iv, party, column) for party, columns in woe.columns_.items()
                      for column, iv in zip(columns, woe.iv_[party])), reverse=True)
    print("information value, highest first (the bank learns these; the telco only which of its columns stay):")
    for iv, party, column in ranking:
        kept = "selected" if column in selection.selected_columns_[party] else "dropped"
        print(f"  {party:6s} {column:12s} IV {iv:6.3f}  {kept}")
    table = card.points_table()
    print(f"\nscorecard: {card.base_score:g} points at {card.base_odds:g}:1, {card.pdo:g} points to double the odds; "
          f"base points {card.base_points_:.1f} (the bank's)")
    for party in card.parties_:
        own = table[table.party == party]
        print(f"points per bin, held by {party} only:")
        for column, rows in own.groupby("column", sort=False):
            print(f"  {column:12s} " + "  ".join(f"{b} {p:+.1f}" for b, p in zip(rows.bin, rows.points)))

    y = test.labels
    score = fitted.predict_score(test)                       # private prediction: only the bank learns it
    central = centralized_scorecard(woe, train, test, selection.selected_columns_)
    results = {"vfl": (roc_auc_score(y, -score), ks_statistic(y, -score)),
               "centralized": (roc_auc_score(y, central), ks_statistic(y, central))}
    print(f"\nnew rows ({len(y):,}):")
    for name, (auc, ks) in results.items():
        print(f"  {name:12s} AUC {auc:.4f}  KS {ks:.4f}")
    shards = fitted.shards()
    print("\neach party's shard holds its own bins, coding, weights and points: "
          + ", ".join(f"{p} {len(str(s)):,} characters" for p, s in shards.items()))
    return {"ranking": ranking, "results": results, "selected": selection.selected_columns_}


if __name__ == "__main__":
    raise SystemExit(run_script(main))
