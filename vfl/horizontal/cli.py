"""``vfl fedavg``: simulate horizontal federated training on a bundled data set."""

from __future__ import annotations

import argparse
import sys
import warnings

from .afl import AgnosticFL
from .aggregation import AGGREGATORS
from .datasets import DATASETS, load_dataset
from .errors import FederatedInputError
from .fedavg import FedAvg
from .models import MODELS
from .partition import PARTITIONS, partition, split_clients

DESCRIPTION = """\
Split a scikit-learn data set by rows into K simulated clients and train with
FederatedAveraging (McMahan et al. 2017), printing one line per round.

Knobs (McMahan name / Flower FedAvg name):
  --fraction      C  / fraction_fit     clients sampled per round: max(floor(C*K), --min-fit-clients)
  --local-epochs  E  / (client config)  local passes over each client's data per round
  --batch-size    B  / (client config)  local minibatch size; 'all' = whole local set (B = infinity)
FedSGD is --local-epochs 1 --batch-size all.  The server averages client vectors
weighted by their number of examples (Flower: num_examples; TFF:
ClientWeighting.NUM_EXAMPLES) unless --aggregator says otherwise.
--algorithm afl runs Agnostic Federated Learning (Mohri et al. 2019) instead:
every client is a domain and the worst-domain loss is minimised.
"""

EPILOG = """\
examples:
  vfl fedavg --dataset digits --clients 20 --fraction 0.2 --local-epochs 5 --batch-size 10
  vfl fedavg --partition pathological --model mlp --rounds 100 --csv-out history.csv
  vfl fedavg --partition dirichlet --alpha 0.2 --algorithm afl --fraction 1 --batch-size all
"""


def _batch_size(text: str):
    if text.lower() in {"all", "none", "inf"}:
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"batch size must be >= 1, got {value}")
    return value


def _hidden(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 64,64, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"layer sizes must be positive, got {text!r}")
    return sizes


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``fedavg`` sub-command to ``subparsers``."""
    p = subparsers.add_parser(
        "fedavg", help="horizontal federated averaging (FedAvg / FedSGD / AFL) on a bundled data set",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    data = p.add_argument_group("data and partition")
    data.add_argument("--dataset", choices=DATASETS, default="digits", help="scikit-learn data set (default: digits)")
    data.add_argument("--clients", type=int, default=10, metavar="K", help="number of clients K (default: 10)")
    data.add_argument("--partition", choices=PARTITIONS, default="iid",
                      help="iid; pathological = sort by label, 2 shards per client; unbalanced = "
                           "log-normal sizes; dirichlet = label skew (default: iid)")
    data.add_argument("--alpha", type=float, default=0.5, help="Dirichlet concentration; small = skewed (default: 0.5)")
    data.add_argument("--shards-per-client", type=int, default=2, help="shards per client for pathological (default: 2)")
    data.add_argument("--sigma", type=float, default=1.0, help="log-normal shape for unbalanced sizes (default: 1.0)")
    data.add_argument("--test-size", type=float, default=0.2, help="held-out fraction (default: 0.2)")

    fl = p.add_argument_group("federated training")
    fl.add_argument("--algorithm", choices=("fedavg", "afl"), default="fedavg",
                    help="fedavg, or afl = Stochastic-AFL (uses --fraction, --batch-size, --lr, --lambda-lr; "
                         "ignores --local-epochs and --aggregator) (default: fedavg)")
    fl.add_argument("--rounds", type=int, default=50, help="communication rounds (default: 50)")
    fl.add_argument("--fraction", type=float, default=0.1, metavar="C",
                    help="C / fraction_fit, fraction of clients per round, in (0, 1] (default: 0.1)")
    fl.add_argument("--min-fit-clients", type=int, default=1, help="minimum clients per round (default: 1)")
    fl.add_argument("--local-epochs", type=int, default=1, metavar="E", help="E, local epochs (default: 1)")
    fl.add_argument("--batch-size", type=_batch_size, default=10, metavar="B",
                    help="B, local minibatch size, or 'all' for the whole local set (default: 10)")
    fl.add_argument("--lr", type=float, default=0.1, help="client learning rate eta (default: 0.1)")
    fl.add_argument("--lambda-lr", type=float, default=0.1, help="AFL step on the mixture weights (default: 0.1)")
    fl.add_argument("--aggregator", choices=AGGREGATORS, default="mean",
                    help="mean = weighted by examples; median / trimmed_mean = robust, unweighted (default: mean)")
    fl.add_argument("--trim-beta", type=float, default=0.2, help="fraction trimmed per end by trimmed_mean (default: 0.2)")

    mdl = p.add_argument_group("model and output")
    mdl.add_argument("--model", choices=MODELS, default="logreg", help="logreg or mlp (default: logreg)")
    mdl.add_argument("--hidden", type=_hidden, default=(64, 64), help="MLP hidden sizes, e.g. 64,64 (default: 64,64)")
    mdl.add_argument("--l2", type=float, default=0.0, help="L2 penalty (default: 0)")
    mdl.add_argument("--seed", type=int, default=0, help="seed for split, partition and training (default: 0)")
    mdl.add_argument("--csv-out", metavar="PATH", help="also write the per-round history as CSV")
    mdl.add_argument("--no-progress", action="store_true", help="no progress bar (also off when stderr is not a tty)")
    p.set_defaults(func=run)
    return p


def _format_table(history) -> str:
    columns = ["round", "clients", "train_loss", "test_accuracy"]
    if "worst_domain_loss" in history:
        columns.append("worst_domain_loss")
    columns += ["bytes_down", "bytes_up", "bytes_total"]
    formats = {"train_loss": "{:.4f}".format, "test_accuracy": "{:.4f}".format,
               "worst_domain_loss": "{:.4f}".format}
    return history[columns].to_string(index=False, formatters=formats)


def run(args: argparse.Namespace) -> int:
    """Train as ``args`` say, print the per-round table; exit code 0, or 2 on bad input."""
    try:
        X_train, X_test, y_train, y_test = load_dataset(args.dataset, args.test_size, args.seed)
        parts = partition(y_train, args.clients, args.partition, alpha=args.alpha,
                          shards_per_client=args.shards_per_client, sigma=args.sigma, seed=args.seed)
        clients = split_clients(X_train, y_train, parts)
        common = dict(num_rounds=args.rounds, fraction_fit=args.fraction, min_fit_clients=args.min_fit_clients,
                      batch_size=args.batch_size, learning_rate=args.lr, hidden_layer_sizes=args.hidden,
                      l2=args.l2, random_state=args.seed,
                      progress=not args.no_progress and sys.stderr.isatty())
        if args.algorithm == "afl":
            est = AgnosticFL(args.model, lambda_learning_rate=args.lambda_lr, **common)
        else:
            est = FedAvg(args.model, local_epochs=args.local_epochs, aggregator=args.aggregator,
                         trim_beta=args.trim_beta, **common)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            est.fit(clients, X_test, y_test, classes=sorted(set(y_train)))
    except FederatedInputError as exc:
        print(f"vfl fedavg: error: {exc}", file=sys.stderr)
        return 2
    for warning in caught:  # e.g. divergence, or a robust aggregator with too few clients per round
        print(f"vfl fedavg: warning: {warning.message}", file=sys.stderr)
    sizes = [len(idx) for idx in parts]
    knobs = f"C={args.fraction}, " + ("" if args.algorithm == "afl" else f"E={args.local_epochs}, ")
    knobs += f"B={'all' if args.batch_size is None else args.batch_size}"
    print(f"{args.algorithm} on {args.dataset}: K={args.clients} clients ({args.partition}, sizes "
          f"{min(sizes)}..{max(sizes)}), {knobs}, model={args.model}, {est.model_.n_params} parameters")
    print(_format_table(est.history_))
    last = est.history_.iloc[-1]
    print(f"final test accuracy {last.test_accuracy:.4f}; {int(last.bytes_total):,} bytes exchanged")
    if args.algorithm == "afl":
        print("log loss per client (domain):", " ".join(f"{v:.3f}" for v in est.domain_losses_))
        print("mixture weights lambda:", " ".join(f"{v:.3f}" for v in est.lambda_))
    if args.csv_out:
        est.history_.to_csv(args.csv_out, index=False)
        print(f"history written to {args.csv_out}")
    return 0
