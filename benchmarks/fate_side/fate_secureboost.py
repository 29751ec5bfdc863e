"""One FATE 2.2 hetero SecureBoost run on one machine (guest and host, no arbiter); writes JSON.

Run by FATE's interpreter (``python -m benchmarks --fate secureboost`` does it, see
``benchmarks/fate_compare.py``); vfl never imports this file. FATE's launcher
(``fate.arch.launchers.multiprocess_launcher.launch``) starts one process per party with FATE's
standalone computing and federation and calls :func:`run_party` in each. That function does what
FATE's pipeline does for ``reader -> psi -> hetero_secureboost``: each party reads its CSV
(float64, 4 partitions), FATE's ECDH PSI intersects the ids, then the component's train step:
the guest sets its Paillier cipher (the component's ``he_param``, here ``--key_bits`` bits) and both
parties fit ``HeteroSecureBoostGuest`` / ``HeteroSecureBoostHost`` with the component's arguments
(its defaults unless given below); then both run FATE's prediction protocol on the training rows.

Timing, in each party's process with ``time.perf_counter``, by wrapping FATE's own methods
(nothing of FATE's computation changes; :class:`fate_common.Clock`):

* ``fit_s``: the guest's whole ``fit`` (binning, key generation, every tree);
* ``tree_s``: each tree from the guest starting it to the guest starting the next (the last one ends
  when ``fit`` returns). A tree starts where the guest computes that round's gradients
  (``_compute_gh`` in ``fate/ml/ensemble/algo/secureboost/hetero/guest.py``, called once at the top of
  every boosting round), so a tree's time includes its gradients, its fit and the score update;
* ``phases``, per tree, seconds and calls of the wrapped methods whose call started inside the tree:
  at the guest ``encrypt_gh`` (``HeteroDecisionTreeGuest._g_h_process``: FATE packs g and h of a row
  into one integer and encrypts it, ``pk.encrypt_encoded(..., obfuscate=True)``, one Paillier
  encryption per row), ``send_gh`` (the same plus sending), ``guest_histogram`` (plaintext
  histograms), ``split`` (finding splits: waits for the host's encrypted histograms, decrypts them,
  compares gains), ``decrypt_host_histogram`` (within ``split``), ``update_positions`` (moving rows
  down a layer, with the host's answer); at the host ``host_histogram`` (histograms of the encrypted
  g/h), ``pack_split_info`` (``i_squeeze``: packing histogram sums into fewer ciphertexts),
  ``receive_gh``, ``receive_nodes``, ``update_positions``;
* ``predict_s``: FATE's prediction of every training row (guest and host walking the trees);
* ``trees``: every tree's nodes as the guest holds them (the host's split features and values are
  added from the host's file by the driver), to check that another system builds the same trees.

Run (the comparison driver does this)::

    $VFL_FATE_PYTHON benchmarks/fate_side/fate_secureboost.py --parties guest:9999 host:10000 \\
        --guest_data G.csv --host_data H.csv --num_trees 5 --out result.json
"""

import logging
import time
from dataclasses import asdict, dataclass, field

from fate.arch.launchers.argparser import HfArgumentParser
from fate.arch.launchers.multiprocess_launcher import launch
from fate_common import (Clock, CommonArguments, auc, host_out, check_pandas, read_and_intersect,
                         versions, write_json)


@dataclass
class SecureBoostArguments(CommonArguments):
    """The ``hetero_secureboost`` component's train parameters, with the component's defaults."""

    num_trees: int = field(default=3)
    learning_rate: float = field(default=0.3)
    max_depth: int = field(default=3)
    complete_secure: int = field(default=0)
    max_bin: int = field(default=32)
    objective: str = field(default="binary:bce")
    num_class: int = field(default=2)
    goss: bool = field(default=False)
    goss_start_iter: int = field(default=5)
    top_rate: float = field(default=0.2)
    other_rate: float = field(default=0.1)
    l1: float = field(default=0.0)
    l2: float = field(default=0.1)
    min_impurity_split: float = field(default=1e-2)
    min_sample_split: int = field(default=2)
    min_leaf_node: int = field(default=1)
    min_child_weight: float = field(default=1.0)
    gh_pack: bool = field(default=True)
    split_info_pack: bool = field(default=True)
    hist_sub: bool = field(default=True)


def _arguments() -> SecureBoostArguments:
    return HfArgumentParser(SecureBoostArguments).parse_args_into_dataclasses(return_remaining_strings=True)[0]


def _guest_parameters(args: SecureBoostArguments) -> dict:
    """What the component passes to ``HeteroSecureBoostGuest`` (``random_seed`` is the class's default)."""
    names = ["num_trees", "max_depth", "complete_secure", "learning_rate", "max_bin", "l1", "l2",
             "min_impurity_split", "min_sample_split", "min_leaf_node", "min_child_weight", "objective",
             "num_class", "gh_pack", "split_info_pack", "hist_sub", "top_rate", "other_rate", "goss_start_iter",
             "goss"]
    return {name: getattr(args, name) for name in names}


def _host_parameters(args: SecureBoostArguments) -> dict:
    return {name: getattr(args, name) for name in ("num_trees", "max_depth", "complete_secure", "max_bin", "hist_sub")}


def _nodes(tree) -> list:
    return [{"nid": n.nid, "site": n.sitename, "feature": n.fid, "value": n.bid, "leaf": bool(n.is_leaf),
             "weight": float(n.weight) if n.is_leaf else None, "samples": int(n.sample_num), "left": n.l,
             "right": n.r} for n in tree.get_nodes()]


def _summary(nodes: list) -> dict:
    """Nodes, leaves and depth of one tree from its node list."""
    children = {n["nid"]: (n["left"], n["right"]) for n in nodes if not n["leaf"]}
    depth, layer = 0, [min(n["nid"] for n in nodes)]
    while True:
        layer = [c for nid in layer for c in children.get(nid, ()) if c is not None and c >= 0]
        if not layer:
            break
        depth += 1
    return {"nodes": len(nodes), "leaves": sum(n["leaf"] for n in nodes), "depth": depth}


def _host(ctx, args: SecureBoostArguments, data, psi_s: float) -> None:
    from fate.arch.histogram import DistributedHistogram
    from fate.ml.ensemble import HeteroSecureBoostHost
    from fate.ml.ensemble.learner.decision_tree.hetero.host import HeteroDecisionTreeHost
    from fate.ml.ensemble.learner.decision_tree.tree_core.hist import SBTHistogramBuilder
    from fate.ml.ensemble.learner.decision_tree.tree_core.splitter import SBTSplitter

    clock = Clock()
    clock.wrap(HeteroDecisionTreeHost, "booster_fit", "tree_fit")
    clock.wrap(HeteroDecisionTreeHost, "_get_gh", "receive_gh")
    clock.wrap(SBTHistogramBuilder, "compute_hist", "host_histogram")
    clock.wrap(DistributedHistogram, "i_squeeze", "pack_split_info")
    clock.wrap(SBTSplitter, "split", "send_histogram")
    clock.wrap(HeteroDecisionTreeHost, "_sync_nodes", "receive_nodes")
    clock.wrap(HeteroDecisionTreeHost, "_update_sample_pos", "update_positions")
    booster = HeteroSecureBoostHost(**_host_parameters(args))
    start = time.perf_counter()
    booster.fit(ctx.sub_ctx("train"), data)
    end = time.perf_counter()
    clock.restore()
    start_predict = time.perf_counter()
    booster.predict(ctx.sub_ctx("predict"), data)
    predict_s = time.perf_counter() - start_predict
    bounds = clock.starts("tree_fit") + [end]
    splits = [{n["nid"]: {"feature": n["feature"], "value": n["value"]} for n in _nodes(tree)
               if not n["leaf"] and n["feature"] is not None} for tree in booster.get_trees()]
    write_json(host_out(args.out), {
        "rows": int(data.shape[0]), "columns": int(data.shape[1]), "psi_s": psi_s, "fit_s": end - start,
        "predict_s": predict_s, "phases": clock.per_interval(bounds), "splits": splits,
        "parameters": _host_parameters(args),
    })


def run_party(ctx) -> None:
    """Called by FATE's launcher in each party's process."""
    from fate.ml.ensemble import HeteroSecureBoostGuest
    from fate.ml.ensemble.algo.secureboost.hetero import guest as boosting
    from fate.ml.ensemble.learner.decision_tree.hetero.guest import HeteroDecisionTreeGuest
    from fate.ml.ensemble.learner.decision_tree.tree_core.hist import SBTHistogramBuilder
    from fate.ml.ensemble.learner.decision_tree.tree_core.splitter import SBTSplitter

    check_pandas()
    args = _arguments()
    if ctx.is_on_guest:   # as the component: only the guest sets a cipher; the host gets the public key
        ctx.cipher.set_phe(ctx.device, {"kind": "paillier", "key_length": args.key_bits})
    data, psi_s = read_and_intersect(ctx, args)
    if ctx.is_on_host:
        _host(ctx, args, data, psi_s)
        return

    clock = Clock()
    clock.wrap(boosting, "_compute_gh", "gradients")   # once at the top of every boosting round
    clock.wrap(HeteroDecisionTreeGuest, "booster_fit", "tree_fit")
    clock.wrap(HeteroDecisionTreeGuest, "_g_h_process", "encrypt_gh")
    clock.wrap(HeteroDecisionTreeGuest, "_send_gh", "send_gh")
    clock.wrap(SBTHistogramBuilder, "compute_hist", "guest_histogram")
    clock.wrap(SBTSplitter, "split", "split")
    clock.wrap(SBTSplitter, "_recover_pack_split", "decrypt_host_histogram")
    clock.wrap(HeteroDecisionTreeGuest, "_update_sample_pos", "update_positions")
    booster = HeteroSecureBoostGuest(**_guest_parameters(args))
    start = time.perf_counter()
    booster.fit(ctx.sub_ctx("train"), data)
    end = time.perf_counter()
    clock.restore()

    start_predict = time.perf_counter()
    predicted = booster.predict(ctx.sub_ctx("predict"), data)
    predict_s = time.perf_counter() - start_predict

    marks = clock.starts("gradients")
    bounds = marks + [end]
    trees = [_nodes(tree) for tree in booster.get_trees()]
    first = booster.get_trees()[0] if booster.get_trees() else None
    write_json(args.out, {
        "rows": int(data.shape[0]),
        "columns": int(data.shape[1]),
        "auc": auc(predicted.as_pd_df()),
        "auc_cached": auc(booster.get_train_predict().as_pd_df()),
        "fit_s": end - start,
        "setup_s": marks[0] - start if marks else None,
        "tree_s": [b - a for a, b in zip(bounds, bounds[1:])],
        "phases": clock.per_interval(bounds),
        "predict_s": predict_s,
        "psi_s": psi_s,
        "loss": [float(v) for v in booster._loss_history],
        "trees": trees,
        "tree_shapes": [_summary(nodes) for nodes in trees],
        "pack_info": dict(first._pack_info) if first is not None else None,
        "parameters": _guest_parameters(args),
        "hyper_parameters": booster._get_hyper_param(),
        "random_seed": booster.random_seed,
        "arguments": asdict(args),
        "he_param": {"kind": "paillier", "key_length": args.key_bits},
        "key_bits": args.key_bits,
        "versions": versions(),
    })


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.WARNING)
    launch(run_party, extra_args_desc=[SecureBoostArguments])
