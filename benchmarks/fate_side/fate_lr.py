"""One FATE 2.2 hetero coordinated logistic regression run on one machine; prints nothing, writes JSON.

Not part of vfl: FATE is the yardstick of ``python -m benchmarks --fate`` (``benchmarks/fate_compare.py``),
which runs this script by path with FATE's own interpreter; vfl never imports it. FATE lives in a
virtualenv of its own (never in vfl's setup.cfg; its pins, e.g. numpy<2 and scikit-learn 1.4.1, would
clash with vfl's); the install commands are in ``benchmarks/fate_compare.py``.

How FATE runs here without a cluster: ``fate.arch.launchers.multiprocess_launcher.launch`` starts one
process per party (guest = our B, host = our A, arbiter = our C) with FATE's *standalone* computing
(LMDB tables under ``--data_dir``) and standalone federation between the processes, and calls the
function below in each.  That function does what FATE's pipeline does for its benchmark
(``examples/benchmark_quality/lr``: reader -> psi -> coordinated_lr): it reads the party's CSV into
a FATE DataFrame (float64, 4 partitions, as FATE's ``lr_benchmark.yaml`` uploads it), intersects the
ids with FATE's ECDH PSI (curve25519), trains ``CoordinatedLRModuleGuest/Host/Arbiter`` with Paillier
keys of ``--key_bits`` (the component's ``he_param``), then predicts the training rows as the
component does after training.

Timing, taken in the guest's process with ``time.perf_counter``:

* ``fit_s``: the whole ``fit`` (key generation at the arbiter and the first exchanges included);
* ``epoch_s``: each epoch, from the guest starting it to the guest starting the next (the last one
  ends when ``fit`` returns).  The epoch starts are read by wrapping FATE's ``Optimizer.set_iters``,
  which the guest calls once at the top of every epoch; nothing in FATE's computation is changed;
* ``predict_s``: the guest's ``predict`` of every training row (it waits for the host's plaintext
  partial scores, FATE's inference protocol).

Quality along the way: the guest and the host each record their weights after every epoch (the value
``Optimizer.update_weights`` returns, its last call in the epoch), ``epoch_weights`` in the guest's
JSON (intercept last) and in the host's, with the columns they belong to (``header``); the driver
scores every row with them (the two partial scores summed, as FATE's prediction does) and so gets
FATE's train AUC after each epoch. ``epoch_cpu_s``: the CPU seconds of the whole run's process tree
(the launcher, every party and its computing workers, read with psutil) at the start of ``fit``
and at the end of each epoch, so the CPU a run spends to reach an AUC is read off as for the time.

Run (the comparison driver does this)::

    $VFL_FATE_PYTHON benchmarks/fate_side/fate_lr.py --parties guest:9999 host:10000 arbiter:10000 \\
        --guest_data G.csv --host_data H.csv --epochs 5 --lr 0.15 --alpha 0.01 --out result.json

``launch`` parses ``sys.argv`` again inside every party's process, hence the dataclass arguments.
"""

import logging
import time
from dataclasses import dataclass, field

from fate.arch.launchers.argparser import HfArgumentParser
from fate.arch.launchers.multiprocess_launcher import launch
from fate_common import CommonArguments, auc, host_out, read_and_intersect, tree_cpu_seconds, versions, write_json


@dataclass
class RunArguments(CommonArguments):
    epochs: int = field(default=5)
    batch_size: int = field(default=0, metadata={"help": "0: full batch"})
    optimizer: str = field(default="rmsprop")
    lr: float = field(default=0.15)
    penalty: str = field(default="l2")
    alpha: float = field(default=0.01)
    init: str = field(default="random_uniform", metadata={"help": "FATE's init_param method"})
    random_state: int = field(default=42, metadata={"help": "the random start's seed; -1: none (FATE's default)"})
    scheduler: str = field(default="constant", metadata={"help": "constant (factor 1) or linear"})
    start_factor: float = field(default=1.0, metadata={"help": "linear scheduler"})
    total_iters: int = field(default=1000, metadata={"help": "linear scheduler"})
    tol: float = field(default=0.0, metadata={"help": "arbiter's early stop on the loss change; 0 never stops"})
    precision: int = field(default=23, metadata={"help": "FATE's floating_point_precision"})


def _arguments() -> RunArguments:
    return HfArgumentParser(RunArguments).parse_args_into_dataclasses(return_remaining_strings=True)[0]


def _settings(args: RunArguments) -> dict:
    if args.scheduler == "linear":
        scheduler = {"method": "linear", "scheduler_params": {"start_factor": args.start_factor,
                                                               "total_iters": args.total_iters}}
    else:
        scheduler = {"method": "constant", "scheduler_params": {"factor": 1.0, "total_iters": 1}}
    return dict(
        epochs=args.epochs,
        batch_size=args.batch_size or None,
        optimizer_param={"method": args.optimizer, "penalty": args.penalty, "alpha": args.alpha,
                         "optimizer_params": {"lr": args.lr}},
        learning_rate_param=scheduler,
    )


def run_party(ctx) -> None:
    """Called by FATE's launcher in each party's process."""
    from fate.ml.glm import CoordinatedLRModuleArbiter, CoordinatedLRModuleGuest, CoordinatedLRModuleHost

    args = _arguments()
    settings = _settings(args)
    ctx.cipher.set_phe(ctx.device, {"kind": "paillier", "key_length": args.key_bits})
    init = {"method": args.init, "fit_intercept": True,
            "random_state": None if args.random_state < 0 else args.random_state}

    if ctx.is_on_arbiter:
        module = CoordinatedLRModuleArbiter(epochs=args.epochs, early_stop="diff", tol=args.tol,
                                            batch_size=settings["batch_size"],
                                            optimizer_param=settings["optimizer_param"],
                                            learning_rate_param=settings["learning_rate_param"])
        module.fit(ctx.sub_ctx("train"))
        return

    data, psi_s = read_and_intersect(ctx, args)
    from fate.ml.utils import _optimizer

    epoch_weights = _record_weights(_optimizer.Optimizer)
    common = dict(epochs=args.epochs, batch_size=settings["batch_size"],
                  optimizer_param=settings["optimizer_param"],
                  learning_rate_param=settings["learning_rate_param"], init_param=init,
                  floating_point_precision=args.precision)
    if ctx.is_on_host:
        module = CoordinatedLRModuleHost(**common)
        module.fit(ctx.sub_ctx("train"), data)
        module.predict(ctx.sub_ctx("predict"), data)
        write_json(host_out(args.out), {"epoch_weights": epoch_weights, "header": list(module.estimator.header)})
        return

    marks, cpu_marks = [], []
    set_iters = _optimizer.Optimizer.set_iters

    def marking(self, new_iters):      # the guest calls it once at the top of every epoch
        marks.append(time.perf_counter())
        cpu_marks.append(tree_cpu_seconds())
        return set_iters(self, new_iters)

    _optimizer.Optimizer.set_iters = marking
    module = CoordinatedLRModuleGuest(threshold=0.5, **common)
    start_cpu = tree_cpu_seconds()
    start = time.perf_counter()
    module.fit(ctx.sub_ctx("train"), data)
    end = time.perf_counter()
    end_cpu = tree_cpu_seconds()
    _optimizer.Optimizer.set_iters = set_iters

    start_predict = time.perf_counter()
    result = module.predict(ctx.sub_ctx("predict"), data)
    predict_s = time.perf_counter() - start_predict

    frame = result.as_pd_df()
    bounds = marks + [end]
    record = {
        "rows": int(len(frame)),
        "auc": auc(frame),
        "fit_s": end - start,
        "setup_s": marks[0] - start if marks else None,
        "epoch_s": [b - a for a, b in zip(bounds, bounds[1:])],
        "predict_s": predict_s,
        "psi_s": psi_s,
        "weights": [float(v) for v in module.estimator.w.detach().flatten()],
        "epoch_weights": epoch_weights,
        "header": list(module.estimator.header),
        "epoch_cpu_s": [c - start_cpu for c in cpu_marks[1:] + [end_cpu]],
        "versions": versions(),
        "key_bits": args.key_bits,
    }
    write_json(args.out, record)


def _record_weights(optimizer_class) -> list:
    """Wrap ``optimizer_class.update_weights`` (every weight update of this party) so that the returned list
    holds the party's weights after each epoch (the epoch's last update), FATE's computation unchanged."""
    epochs, update, set_iters = [], optimizer_class.update_weights, optimizer_class.set_iters

    def updating(self, *arguments, **keywords):
        weights = update(self, *arguments, **keywords)
        epochs[-1] = [float(v) for v in weights.detach().flatten()]
        return weights

    def starting(self, new_iters):      # the top of every epoch, at the guest and at the host
        epochs.append(None)
        return set_iters(self, new_iters)

    optimizer_class.update_weights, optimizer_class.set_iters = updating, starting
    return epochs


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.WARNING)
    launch(run_party, extra_args_desc=[RunArguments])
