"""``vfl fedavg``: simulate horizontal federated training on a bundled data set.

One sub-command for every algorithm of :mod:`vfl.horizontal` (``--algorithm``),
so that they run on the same clients and are reported the same way.
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np

from .afl import AgnosticFL
from .aggregation import AGGREGATORS
from .datasets import DATASETS, load_clients
from .errors import FederatedInputError
from .fedavg import FedAvg
from .hierfavg import HierFAVG
from .l2gd import L2GD
from .local import LocalOnly
from .models import MODELS
from .partition import PARTITIONS
from .perfedavg import PerFedAvg

DESCRIPTION = """\
Deal a scikit-learn data set by rows to K simulated clients, each with a test
set from its own distribution, and train with one of the horizontal
algorithms, printing one line per round.

Data: all rows are partitioned (--partition), then every client's rows are
split into its training and test rows label by label (--test-size), so a
client's test set has its own label mix.  Each round reports the global
model's accuracy on all clients' test rows and the per-client accuracy of the
model that serves each client (its own model for the personalized
algorithms): the mean over clients and the mean of the worst 10 %.

Algorithms (--algorithm):
  fedavg     FederatedAveraging (McMahan et al. 2017); FedSGD is --local-epochs 1 --batch-size all
  afl        Agnostic FL (Mohri et al. 2019): the worst client (domain) loss is minimised
  l2gd       personalized: one model per client pulled toward their mean with strength
             --lam, aggregation-step probability --p (L2GD, Hanzely & Richtarik 2020)
  perfedavg  personalized: a meta-model each client adapts by a gradient step of size
             --adapt-lr (Per-FedAvg, Fallah et al. 2020), --tau local steps of size --lr
  hierfavg   hierarchical: clients -> --edges edge servers -> cloud; --kappa1 local steps
             per edge round, --kappa2 edge rounds per cloud round (HierFAVG, Liu et al. 2020)
  local      local-only training, no communication (the baseline)

Knobs (McMahan name / Flower FedAvg name):
  --fraction      C  / fraction_fit     clients sampled per round: max(floor(C*K), --min-fit-clients)
                                        (fedavg, afl, perfedavg; l2gd, hierfavg and local use all clients)
  --local-epochs  E  / (client config)  local passes over each client's data per round (fedavg, local)
  --batch-size    B  / (client config)  local minibatch size; 'all' = whole local set (B = infinity)
The FedAvg server averages client vectors weighted by their number of examples
(Flower: num_examples; TFF: ClientWeighting.NUM_EXAMPLES) unless --aggregator
says otherwise.
"""

EPILOG = """\
examples:
  vfl fedavg --dataset digits --clients 20 --fraction 0.2 --local-epochs 5 --batch-size 10
  vfl fedavg --partition pathological --model mlp --rounds 100 --csv-out history.csv
  vfl fedavg --partition dirichlet --alpha 0.2 --algorithm afl --fraction 1 --batch-size all
  vfl fedavg --partition pathological --clients 20 --algorithm l2gd --lam 0.1 --p 0.2 --batch-size all --lr 0.3
  vfl fedavg --partition pathological --clients 20 --algorithm perfedavg --adapt-lr 1 --fraction 1 --batch-size all
  vfl fedavg --partition pathological --clients 20 --algorithm hierfavg --edges 4 --kappa1 5 --kappa2 5 --batch-size all
"""

#: Values of --algorithm.
ALGORITHMS = ("fedavg", "afl", "l2gd", "perfedavg", "hierfavg", "local")


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
        "fedavg", help="horizontal federated learning (FedAvg / FedSGD / AFL / L2GD / Per-FedAvg / HierFAVG / "
                       "local-only) on a bundled data set",
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
    data.add_argument("--test-size", type=float, default=0.2,
                      help="fraction of each client's rows (of each label) held out as its test set (default: 0.2)")

    fl = p.add_argument_group("federated training")
    fl.add_argument("--algorithm", choices=ALGORITHMS, default="fedavg",
                    help="fedavg, afl, l2gd, perfedavg, hierfavg or local (see above) (default: fedavg)")
    fl.add_argument("--rounds", type=int, default=50,
                    help="communication rounds; cloud rounds for hierfavg (default: 50)")
    fl.add_argument("--fraction", type=float, default=0.1, metavar="C",
                    help="C / fraction_fit, fraction of clients per round, in (0, 1] (default: 0.1)")
    fl.add_argument("--min-fit-clients", type=int, default=1, help="minimum clients per round (default: 1)")
    fl.add_argument("--local-epochs", type=int, default=1, metavar="E", help="E, local epochs (default: 1)")
    fl.add_argument("--batch-size", type=_batch_size, default=10, metavar="B",
                    help="B, local minibatch size, or 'all' for the whole local set (default: 10)")
    fl.add_argument("--lr", type=float, default=0.1,
                    help="client learning rate: eta; beta for perfedavg (default: 0.1)")
    fl.add_argument("--lambda-lr", type=float, default=0.1, help="AFL step on the mixture weights (default: 0.1)")
    fl.add_argument("--aggregator", choices=AGGREGATORS, default="mean",
                    help="mean = weighted by examples; median / trimmed_mean = robust, unweighted (default: mean)")
    fl.add_argument("--trim-beta", type=float, default=0.2, help="fraction trimmed per end by trimmed_mean (default: 0.2)")

    pfl = p.add_argument_group("personalized and hierarchical (l2gd, perfedavg, hierfavg)")
    pfl.add_argument("--lam", type=float, default=0.5,
                     help="l2gd: lambda, pull of each model toward the mean; 0 = local only (default: 0.5)")
    pfl.add_argument("--p", type=float, default=0.2,
                     help="l2gd: probability of an aggregation step, in (0, 1); 1/p local steps per round "
                          "on average (default: 0.2)")
    pfl.add_argument("--adapt-lr", type=float, default=0.01, metavar="ALPHA",
                     help="perfedavg: alpha, the personalizing gradient step; 0 = FedAvg (default: 0.01)")
    pfl.add_argument("--tau", type=int, default=5, help="perfedavg: tau, local steps per round (default: 5)")
    pfl.add_argument("--variant", choices=("hf", "fo"), default="hf",
                     help="perfedavg: hf = Hessian-free, fo = first-order (default: hf)")
    pfl.add_argument("--edges", type=int, default=2,
                     help="hierfavg: L edge servers, clients attached in contiguous blocks (default: 2)")
    pfl.add_argument("--kappa1", type=int, default=5, help="hierfavg: local steps per edge round (default: 5)")
    pfl.add_argument("--kappa2", type=int, default=2, help="hierfavg: edge rounds per cloud round (default: 2)")

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
    wanted = ["round", "clients", "local_steps", "aggregation_steps", "edges", "edge_rounds", "train_loss",
              "test_accuracy", "client_accuracy_mean", "client_accuracy_worst10", "worst_domain_loss",
              "bytes_down", "bytes_up", "bytes_client_edge", "bytes_edge_cloud", "bytes_total"]
    columns = [c for c in wanted if c in history and not history[c].isna().all()]
    four = "{:.4f}".format
    formats = {c: four for c in ("train_loss", "test_accuracy", "client_accuracy_mean", "client_accuracy_worst10",
                                 "worst_domain_loss")}
    return history[columns].to_string(index=False, formatters=formats)


def _estimator(args: argparse.Namespace):
    """The estimator ``args`` ask for (hyperparameters are checked by its ``fit``)."""
    common = dict(num_rounds=args.rounds, batch_size=args.batch_size, hidden_layer_sizes=args.hidden, l2=args.l2,
                  random_state=args.seed, progress=not args.no_progress and sys.stderr.isatty())
    sampling = dict(fraction_fit=args.fraction, min_fit_clients=args.min_fit_clients)
    if args.algorithm == "afl":
        return AgnosticFL(args.model, learning_rate=args.lr, lambda_learning_rate=args.lambda_lr, **sampling, **common)
    if args.algorithm == "l2gd":
        return L2GD(args.model, lam=args.lam, p=args.p, learning_rate=args.lr, **common)
    if args.algorithm == "perfedavg":
        return PerFedAvg(args.model, tau=args.tau, alpha=args.adapt_lr, beta=args.lr, variant=args.variant,
                         **sampling, **common)
    if args.algorithm == "hierfavg":
        return HierFAVG(args.model, kappa1=args.kappa1, kappa2=args.kappa2, edges=args.edges,
                        learning_rate=args.lr, **common)
    if args.algorithm == "local":
        return LocalOnly(args.model, local_epochs=args.local_epochs, learning_rate=args.lr, **common)
    return FedAvg(args.model, local_epochs=args.local_epochs, aggregator=args.aggregator, trim_beta=args.trim_beta,
                  learning_rate=args.lr, **sampling, **common)


def _knobs(args: argparse.Namespace) -> str:
    """The algorithm's own knobs, for the heading line."""
    batch = f"B={'all' if args.batch_size is None else args.batch_size}"
    return {
        "fedavg": f"C={args.fraction}, E={args.local_epochs}, {batch}",
        "afl": f"C={args.fraction}, {batch}",
        "l2gd": f"lambda={args.lam}, p={args.p}, {batch}",
        "perfedavg": f"C={args.fraction}, alpha={args.adapt_lr}, beta={args.lr}, tau={args.tau}, "
                     f"{args.variant.upper()}, {batch}",
        "hierfavg": f"L={args.edges} edges, kappa1={args.kappa1}, kappa2={args.kappa2}, {batch}",
        "local": f"E={args.local_epochs}, {batch}",
    }[args.algorithm]


def run(args: argparse.Namespace) -> int:
    """Train as ``args`` say, print the per-round table; exit code 0, or 2 on bad input."""
    try:
        train, tests = load_clients(args.dataset, args.clients, args.partition, test_size=args.test_size,
                                    seed=args.seed, alpha=args.alpha, shards_per_client=args.shards_per_client,
                                    sigma=args.sigma)
        X_test, y_test = np.vstack([X for X, _ in tests]), np.concatenate([y for _, y in tests])
        est = _estimator(args)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            est.fit(train, X_test, y_test, client_tests=tests,
                    classes=np.unique(np.concatenate([y for _, y in train] + [y_test])))
    except FederatedInputError as exc:
        print(f"vfl fedavg: error: {exc}", file=sys.stderr)
        return 2
    for warning in caught:  # e.g. divergence, or a robust aggregator with too few clients per round
        print(f"vfl fedavg: warning: {warning.message}", file=sys.stderr)
    sizes = [len(y) for _, y in train]
    print(f"{args.algorithm} on {args.dataset}: K={args.clients} clients ({args.partition}, {min(sizes)}..{max(sizes)} "
          f"training rows each, {y_test.size} test rows in all), {_knobs(args)}, model={args.model}, "
          f"{est.model_.n_params} parameters")
    print(_format_table(est.history_))
    last = est.history_.iloc[-1]
    if not np.isnan(last.test_accuracy):
        print(f"final test accuracy {last.test_accuracy:.4f} (global model, all clients' test rows)")
    print(f"per-client test accuracy: mean {last.client_accuracy_mean:.4f}, worst 10% "
          f"{last.client_accuracy_worst10:.4f} (each client's model on its own test rows)")
    print(f"{int(last.bytes_total):,} bytes exchanged")
    if args.algorithm == "afl":
        print("log loss per client (domain):", " ".join(f"{v:.3f}" for v in est.domain_losses_))
        print("mixture weights lambda:", " ".join(f"{v:.3f}" for v in est.lambda_))
    if args.csv_out:
        est.history_.to_csv(args.csv_out, index=False)
        print(f"history written to {args.csv_out}")
    return 0
