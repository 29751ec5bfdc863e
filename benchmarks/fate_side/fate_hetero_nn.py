"""One FATE 2.2 Hetero-NN run on one machine (guest and host, no arbiter); writes JSON.

Run by FATE's interpreter (``python -m benchmarks --fate hetero-nn`` does it, see
``benchmarks/fate_compare.py``); vfl never imports this file. FATE's launcher starts one process per
party with FATE's standalone computing and federation and calls :func:`run_party` in each, which does
what FATE's ``hetero_nn`` component does (``fate/components/components/nn/runner/hetero_default_runner.py``):
each party reads its CSV, FATE's ECDH PSI intersects the ids, the rows become a ``TableDataset``,
``HeteroNNModelGuest`` / ``HeteroNNModelHost`` are trained by ``HeteroNNTrainerGuest`` /
``HeteroNNTrainerHost`` (a Hugging Face ``Trainer``), then the guest predicts the training rows.

The network (both data sets): guest bottom Linear(q_guest, 8) + ReLU, host bottom Linear(q_host, 8) +
ReLU, the aggregation layer to 8 units, then the guest's top ReLU, Linear(8, 1), Sigmoid; BCELoss,
torch Adam (learning rate 0.01) on the bottom and top models. Two aggregation layers (``--agg``):

**SSHE** (``SSHEArgument``), as read in ``fate/ml/nn/model_zoo/agg_layer/sshe/agg_layer.py``,
``SSHENeuralNetworkAggregator{Function,}`` in ``fate/arch/protocol/mpc/nn/sshe/nn_layer.py`` and ``SSHE.cross_smm``,
``smm``, ``phe_to_mpc`` in ``fate/arch/protocol/mpc/primitives/sshe.py``. z = h_host W_a + h_guest W_b, W_a and W_b
(8x8) additively shared over Z_2^64 (``ctx.mpc.init_tensor``, drawn by their owner from ``torch.rand``), a Paillier
key per party (``--key_bits``), the layer's own plain SGD at ``layer_lr`` (``SSHENeuralNetworkOptimizerSGD``).
*Forward* (``cross_smm``): the host gets Enc_guest(W_a.share_guest) and (h_guest W_b.share_host - r) to decrypt
(r uniform over the ring); the guest gets Enc_host(W_b.share_host), its masked share, then the host's share of z:
**z is revealed to the guest in the clear** (``...Function.forward``: ``get_plain_text(dst=rank_b)``).
*Backward* (``SSHENeuralNetworkAggregator.backward``): the guest returns Enc_host(dz W_a^T) unmasked for the host
to decrypt: **the host gets dL/dh_host, the gradient of its bottom output, in the clear** (``dha``) and backprops
it through its bottom model itself; then it decrypts Enc_host(dz W_b.share_host^T), also unmasked, for its own
share, and sends that plaintext to the guest (``dhb``): with the share invertible mod 2^64 (odd determinant) it
solves for dz = dL/dz per row. W_a's gradient goes through ``smm`` (masked shares); W_b's, h_guest^T dz, stays
at the guest. **The weights' shares are not hidden either**: every ``encrypt_tensor`` here uses
``PHETensorEncryptor.encrypt_tensor``'s default ``obfuscate=False`` (``fate/arch/tensor/phe/_keypair.py``), and
fate_utils then returns 1 + m n mod n^2 (checked here: Enc(1) = 1 + n, Enc(5) = 1 + 5n, deterministic), which
anyone decrypts with the public key: the guest can read W_a.share_host and W_b.share_host (so it learns W_a,
W_b and then h_host = (z - h_guest W_b) W_a^-1), the host W_a.share_guest (so it learns W_a). (Read from the
code, the encryption checked alone; this run does not mount these attacks.)

**FedPass** (``FedPassArgument``, ``layer_type="linear"``; ``fate/ml/nn/model_zoo/agg_layer/fedpass/agg_layer.py``
over ``AggLayerHost``/``AggLayerGuest`` (``agg_layer/agg_layer.py``), ``LinearPassportBlock`` (``_passport_block.py``)):
each party passes its bottom output through its own passport block (Linear, hidden, Linear, its output scaled and
shifted by functions of secret random passport keys; no cryptography). The host sends its block's output to the
guest in the clear (``AggLayerHost._send_fw_to_guest``), the guest sums the two and sends the host the gradient
with respect to that output in the clear (``AggLayerGuest._send_err_to_host``): obfuscation, nothing keyed.

Timing, in the guest's process with ``time.perf_counter``: ``epoch_s``, each epoch from the trainer's
``on_epoch_begin`` to its ``on_epoch_end`` (a Hugging Face ``TrainerCallback``); ``fit_s``, the whole
``trainer.train()``; ``setup_s``, building the model and trainer (the SSHE layer's shares, ``ctx.mpc.init``);
``phases`` per epoch (SSHE only): ``forward`` and ``backward`` of ``SSHENeuralNetworkAggregator`` and the
layer's SGD ``step`` (:class:`fate_common.Clock`); ``predict_s``: the guest's prediction of every row.

Run (the comparison driver does this)::

    $VFL_FATE_PYTHON benchmarks/fate_side/fate_hetero_nn.py --parties guest:9999 host:10000 \\
        --guest_data G.csv --host_data H.csv --agg sshe --epochs 5 --batch_size 256 --out result.json
"""

import logging
import time
from dataclasses import asdict, dataclass, field

from fate.arch.launchers.argparser import HfArgumentParser
from fate.arch.launchers.multiprocess_launcher import launch
from fate_common import Clock, CommonArguments, host_out, read_and_intersect, versions, write_json

AGG_MODES = ("sshe", "fedpass")


@dataclass
class HeteroNNArguments(CommonArguments):
    """The network and its training (the same on both data sets but for the epochs)."""

    agg: str = field(default="sshe", metadata={"help": "the aggregation layer: sshe or fedpass"})
    epochs: int = field(default=5)
    batch_size: int = field(default=256)
    learning_rate: float = field(default=0.01, metadata={"help": "Adam's, bottom and top models"})
    layer_lr: float = field(default=0.01, metadata={"help": "SSHE: the agg layer's SGD rate (FATE's default)"})
    bottom_units: int = field(default=8)
    agg_units: int = field(default=8)
    fedpass_hidden: int = field(default=128, metadata={"help": "FedPass: the passport block's hidden width "
                                                               "(FATE's default)"})
    random_state: int = field(default=42, metadata={"help": "torch's seed and the Trainer's"})


def _arguments() -> HeteroNNArguments:
    args = HfArgumentParser(HeteroNNArguments).parse_args_into_dataclasses(return_remaining_strings=True)[0]
    if args.agg not in AGG_MODES:
        raise ValueError(f"--agg must be one of {', '.join(AGG_MODES)}, got {args.agg!r}")
    return args


def _agg_argument(args: HeteroNNArguments, guest_in: int, host_in: int):
    """The aggregation layer's arguments, the same object at both parties."""
    from fate.ml.nn.model_zoo.hetero_nn_model import FedPassArgument, SSHEArgument

    if args.agg == "sshe":
        return SSHEArgument(guest_in_features=guest_in, host_in_features=host_in, out_features=args.agg_units,
                            layer_lr=args.layer_lr)
    return FedPassArgument(layer_type="linear", in_channels_or_features=args.bottom_units,
                           out_channels_or_features=args.agg_units, hidden_features=args.fedpass_hidden,
                           merge_type="sum")


def _training_arguments(args: HeteroNNArguments):
    from fate.ml.nn.hetero.hetero_nn import TrainingArguments

    return TrainingArguments(num_train_epochs=args.epochs, per_device_train_batch_size=args.batch_size,
                             per_device_eval_batch_size=args.batch_size, no_cuda=True, disable_tqdm=True,
                             seed=args.random_state, log_level="warning", output_dir="./",
                             logging_strategy="epoch")


def _dataset(data):
    """The intersected rows as the component makes them: a ``TableDataset`` of tensors."""
    from fate.ml.nn.dataset.table import TableDataset

    dataset = TableDataset(to_tensor=True)
    dataset.load(data)
    return dataset


def _epoch_clock():
    """A Hugging Face callback that records each epoch's start and end."""
    from transformers import TrainerCallback

    class EpochClock(TrainerCallback):
        def __init__(self):
            self.spans = []

        def on_epoch_begin(self, args, state, control, **kwargs):
            self.spans.append([time.perf_counter(), None])

        def on_epoch_end(self, args, state, control, **kwargs):
            self.spans[-1][1] = time.perf_counter()

    return EpochClock()


def _build(ctx, args: HeteroNNArguments, dataset, features: int):
    """The party's model and trainer (the SSHE layer draws and shares its weights here)."""
    import torch
    from fate.ml.nn.hetero.hetero_nn import HeteroNNTrainerGuest, HeteroNNTrainerHost
    from fate.ml.nn.model_zoo.hetero_nn_model import HeteroNNModelGuest, HeteroNNModelHost

    torch.manual_seed(args.random_state)
    # the SSHE layer's inputs are the bottoms' outputs: bottom_units wide at both parties
    agg = _agg_argument(args, args.bottom_units, args.bottom_units)
    bottom = torch.nn.Sequential(torch.nn.Linear(features, args.bottom_units), torch.nn.ReLU())
    if ctx.is_on_host:
        model = HeteroNNModelHost(bottom_model=bottom, agglayer_arg=agg)
        optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
        return model, HeteroNNTrainerHost(ctx=ctx, model=model, optimizer=optimizer, train_set=dataset,
                                          training_args=_training_arguments(args))
    top = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(args.agg_units, 1), torch.nn.Sigmoid())
    model = HeteroNNModelGuest(top_model=top, bottom_model=bottom, agglayer_arg=agg)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    return model, HeteroNNTrainerGuest(ctx=ctx, model=model, optimizer=optimizer, train_set=dataset,
                                       loss_fn=torch.nn.BCELoss(), training_args=_training_arguments(args))


def _clock_sshe(clock: Clock) -> None:
    from fate.arch.protocol.mpc.nn.sshe import nn_layer

    clock.wrap(nn_layer.SSHENeuralNetworkAggregator, "forward", "forward")
    clock.wrap(nn_layer.SSHENeuralNetworkAggregator, "backward", "backward")
    clock.wrap(nn_layer.SSHENeuralNetworkOptimizerSGD, "step", "step")


def run_party(ctx) -> None:
    """Called by FATE's launcher in each party's process."""
    args = _arguments()
    ctx.cipher.set_phe(ctx.device, {"kind": "paillier", "key_length": args.key_bits})
    data, psi_s = read_and_intersect(ctx, args)
    dataset = _dataset(data)
    own = int(dataset.features.shape[1])
    clock = Clock()
    if args.agg == "sshe":
        _clock_sshe(clock)
    epochs = _epoch_clock()
    start = time.perf_counter()
    model, trainer = _build(ctx, args, dataset, own)
    trainer.add_callback(epochs)
    built = time.perf_counter()
    trainer.train()
    end = time.perf_counter()
    clock.restore()
    start_predict = time.perf_counter()
    prediction = trainer.predict(dataset)
    predict_s = time.perf_counter() - start_predict
    figures = {"rows": len(dataset), "columns": own, "psi_s": psi_s, "setup_s": built - start, "fit_s": end - built,
               "epoch_s": [b - a for a, b in epochs.spans], "predict_s": predict_s, "agg": args.agg}
    if ctx.is_on_host:
        figures["phases"] = clock.per_interval([s[0] for s in epochs.spans] + [end])
        write_json(host_out(args.out), figures)
        return

    from sklearn.metrics import roc_auc_score

    scores = prediction.predictions.reshape(-1)
    labels = prediction.label_ids.reshape(-1)
    figures.update({
        "auc": float(roc_auc_score(labels.astype(int), scores.astype(float))),
        "positives": int(labels.sum()),
        "loss": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
        "phases": clock.per_interval([s[0] for s in epochs.spans] + [end]),
        "model": repr(model),
        "arguments": asdict(args),
        "he_param": {"kind": "paillier", "key_length": args.key_bits} if args.agg == "sshe" else None,
        "key_bits": args.key_bits,
        "versions": versions(),
    })
    write_json(args.out, figures)


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.WARNING)
    launch(run_party, extra_args_desc=[HeteroNNArguments])
