"""One FATE 2.2 SSHE logistic regression run on one machine (guest and host, no arbiter); writes JSON.

Run by FATE's interpreter (``python -m benchmarks --fate sshe-lr`` does it, see
``benchmarks/fate_compare.py``); vfl never imports this file. FATE's launcher starts one process per
party with FATE's standalone computing and federation and calls :func:`run_party` in each, which does
what FATE's pipeline does for ``reader -> psi -> sshe_lr``: each party reads its CSV (float64, 4
partitions), FATE's ECDH PSI intersects the ids, then the component's train step
(``fate/components/components/sshe_lr.py``): ``ctx.mpc.init()``, ``SSHELogisticRegression`` fitted
on the intersected rows, then its prediction of the training rows.

SSHE-LR (``fate.ml.glm.hetero.sshe``) keeps the weights secret-shared between the two parties and
multiplies a party's plaintext features by the other's shares under Paillier (each party has its own
key pair; ``--key_bits``). It is plain gradient descent on the Taylor loss: no optimizer choice, no
penalty, a constant learning rate. The component does not set a cipher, so FATE's default key length
(1024 bits, ``safety.phe.paillier.minimum_key_size``) would apply; here both parties set
``--key_bits`` (2048 by default) as FATE's other runs here do.

Timing, in the guest's process with ``time.perf_counter``, by wrapping FATE's own methods (nothing
of FATE's computation changes; :class:`fate_common.Clock`):

* ``fit_s``: the whole ``fit`` (key generation and the weights' shares included);
* ``epoch_s``: each epoch from the guest starting it to the guest starting the next (the last one
  ends when ``fit`` returns, after the weights are revealed to their owners). An epoch starts when the
  guest iterates its ``DataLoader`` (``fate.arch.dataframe.DataLoader.__iter__``, once per epoch);
* ``phases``, per epoch: ``forward`` (``SSHELogisticRegressionLayer.forward``: the encrypted products
  ``X_host <w>`` and ``X_guest <w>``), ``backward`` (the gradients' products), ``loss`` (the loss
  revealed to the guest every ``reveal_loss_freq`` epochs, FATE's default every epoch),
  ``step`` (the update of the shares);
* ``predict_s``: FATE's prediction of every training row (the host sends its partial scores
  ``X_host w_host`` to the guest in the clear, as FATE's SSHE-LR predicts);
* ``loss``: the loss revealed to the guest after each epoch (read where the guest's ``diff``
  convergence check receives it, ``_DiffConverge.is_converge``; with ``early_stop="diff"`` only).

Run (the comparison driver does this)::

    $VFL_FATE_PYTHON benchmarks/fate_side/fate_sshe_lr.py --parties guest:9999 host:10000 \\
        --guest_data G.csv --host_data H.csv --epochs 5 --learning_rate 0.15 --out result.json
"""

import logging
import time
from dataclasses import asdict, dataclass, field

from fate.arch.launchers.argparser import HfArgumentParser
from fate.arch.launchers.multiprocess_launcher import launch
from fate_common import Clock, CommonArguments, auc, host_out, read_and_intersect, versions, write_json


@dataclass
class SSHEArguments(CommonArguments):
    """The ``sshe_lr`` component's train parameters (its defaults in the comments where they differ)."""

    epochs: int = field(default=5, metadata={"help": "the component's default: 20"})
    batch_size: int = field(default=0, metadata={"help": "0: full batch (the component's default)"})
    learning_rate: float = field(default=0.15, metadata={"help": "the component's default: 0.05"})
    init: str = field(default="random_uniform", metadata={"help": "init_param method"})
    random_state: int = field(default=42, metadata={"help": "init_param random_state (the component's: None)"})
    early_stop: str = field(default="diff")
    tol: float = field(default=0.0, metadata={"help": "0: never stops early (the component's default: 1e-4)"})
    reveal_loss_freq: int = field(default=1)
    threshold: float = field(default=0.5)


def _arguments() -> SSHEArguments:
    return HfArgumentParser(SSHEArguments).parse_args_into_dataclasses(return_remaining_strings=True)[0]


def _parameters(args: SSHEArguments) -> dict:
    """What the component passes to ``SSHELogisticRegression``."""
    return dict(epochs=args.epochs, batch_size=args.batch_size or None, tol=args.tol, early_stop=args.early_stop,
                learning_rate=args.learning_rate,
                init_param={"method": args.init, "fit_intercept": True, "random_state": args.random_state},
                threshold=args.threshold, reveal_every_epoch=False, reveal_loss_freq=args.reveal_loss_freq)


def _weights(module) -> list:
    return [float(v) for v in module.estimator.w.detach().flatten()]


def run_party(ctx) -> None:
    """Called by FATE's launcher in each party's process."""
    from fate.arch.dataframe.utils._dataloader import DataLoader
    from fate.arch.protocol.mpc.nn.sshe import lr_layer
    from fate.ml.glm.hetero.sshe import SSHELogisticRegression
    from fate.ml.utils import _convergence

    args = _arguments()
    ctx.cipher.set_phe(ctx.device, {"kind": "paillier", "key_length": args.key_bits})
    ctx.mpc.init()
    data, psi_s = read_and_intersect(ctx, args)
    module = SSHELogisticRegression(**_parameters(args))
    if ctx.is_on_host:
        start = time.perf_counter()
        module.fit(ctx.sub_ctx("train"), data)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        module.predict(ctx.sub_ctx("predict"), data)
        write_json(host_out(args.out), {"rows": int(data.shape[0]), "columns": int(data.shape[1]), "psi_s": psi_s,
                                        "fit_s": fit_s, "predict_s": time.perf_counter() - start,
                                        "weights": _weights(module)})
        return

    losses = []
    is_converge = _convergence._DiffConverge.is_converge

    def recording(self, loss):     # the guest's convergence check sees each revealed epoch loss
        losses.append(float(loss))
        return is_converge(self, loss)

    _convergence._DiffConverge.is_converge = recording
    clock = Clock()
    clock.wrap(DataLoader, "__iter__", "epoch")    # the guest iterates its batches once per epoch
    clock.wrap(lr_layer.SSHELogisticRegressionLayer, "forward", "forward")
    clock.wrap(lr_layer.SSHELogisticRegressionLayerBackwardFunction, "__call__", "backward")
    clock.wrap(lr_layer.SSHESSHELogisticRegressionLossLayerLazyLoss, "get", "loss")
    clock.wrap(lr_layer.SSHEOptimizerSGD, "step", "step")
    start = time.perf_counter()
    module.fit(ctx.sub_ctx("train"), data)
    end = time.perf_counter()
    clock.restore()
    _convergence._DiffConverge.is_converge = is_converge

    start_predict = time.perf_counter()
    result = module.predict(ctx.sub_ctx("predict"), data)
    predict_s = time.perf_counter() - start_predict

    marks = clock.starts("epoch")
    bounds = marks + [end]
    write_json(args.out, {
        "rows": int(data.shape[0]),
        "columns": int(data.shape[1]),
        "auc": auc(result.as_pd_df()),
        "fit_s": end - start,
        "setup_s": marks[0] - start if marks else None,
        "epoch_s": [b - a for a, b in zip(bounds, bounds[1:])],
        "phases": clock.per_interval(bounds),
        "predict_s": predict_s,
        "psi_s": psi_s,
        "end_epoch": module.estimator.end_epoch,
        "loss": losses,
        "weights": _weights(module),
        "parameters": _parameters(args),
        "arguments": asdict(args),
        "he_param": {"kind": "paillier", "key_length": args.key_bits},
        "key_bits": args.key_bits,
        "versions": versions(),
    })


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.WARNING)
    launch(run_party, extra_args_desc=[SSHEArguments])
