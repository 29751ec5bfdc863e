"""One line per protocol step, for a learner watching a party run.

A :class:`Narrator` is an ``Endpoint(on_message=...)`` hook.  Each message is
narrated once, by its sender: who sends what to whom, what kind of value it is
(``ciphertext``: Paillier-encrypted; ``masked``: decrypted but hidden by a
random mask only the receiver can remove; ``public``: harmless in clear;
``plaintext``: a value in clear that is not public), how many values and how
many bytes.  Lines start with ``[NAME]``, the party's name, so every party can
share one screen.  :func:`message_table` gives the same descriptions as a table,
for a notebook.
"""

from __future__ import annotations

import sys

import numpy as np

from vfl.transport.message import BigInts

#: What each protocol message carries, in the notation of Yang et al. 2019 (``k``: one feature party).
DESCRIPTIONS = {
    "hello": "settings fingerprint, row and column counts and a fresh salt for the row-id digest",
    "ids_digest": "digest of the sorted row ids under both parties' salts",
    "columns": "every data party's column count (for the gradient-equations check)",
    "models": "how many models the run trains or scores (one per class for one-vs-rest)",
    "public_key": "Paillier public key n",
    "resume": "the last epoch it completed",
    "start": "the epoch to resume after (-1: from the start)",
    "schedule": "batch-order seed and row count",
    "scores": "encrypted partial scores [[u_k]]",
    "residual": "encrypted residuals [[d]] = sum_k [[u_k]] + u_B - kappa y",
    "loss_part": "encrypted loss part [[a u_k.d + penalty]]",
    "loss": "encrypted batch loss [[L]]",
    "masked_gradient": "encrypted gradient plus mask [[X^T d + R]]",
    "gradient": "decrypted gradient, still masked: X^T d + R",
    "control": "continue or stop (conjugate gradient: and beta, the next direction's weight)",
    "norm_part": "encrypted share of the squared gradient norm [[|g_k|^2]]",
    "norm": "encrypted squared gradient norm [[|g|^2]], summed over the parties",
    "step": "conjugate gradient's step size eta along the direction p",
    "rows": "number of rows to score",
    "masked_scores": "encrypted scores plus mask [[z + R]]",
    "partial_scores": "partial scores in clear (Table 3: the coordinator learns them)",
    "abort": "this party stopped, and why",
    "packed_scores": "encrypted partial scores [[u_k]], packed",
    "packed_residual": "encrypted residuals [[d]] = sum_k [[u_k]] + u_B - k y, packed",
    "masked_packed_gradient": "encrypted gradient products, every slot masked",
    "packed_loss_part": "encrypted loss part [[a u_k.d + penalty]] in slot s-1",
    "packed_loss": "encrypted batch loss [[L]] in slot s-1, every other slot masked",
    "masked_packed_scores": "encrypted scores, packed, plus one mask uniform over Z_n per ciphertext [[Z + R]]",
    # the shared protocol (vfl.protocols.linear.shared): no party learns a gradient
    "parameters": "how many parameters it holds a share of (its weights, and the label party's intercept)",
    "weight_share": "the coordinator's share of the party's weights, encrypted [[c_k]]",
    "gradient_share": "encrypted gradient plus the party's mask [[X_k^T d + 2^V + rho_k]]: the coordinator keeps "
                      "X_k^T d + rho_k as its share, the party -rho_k",
    "loss_share": "encrypted share of the loss [[a_k.G_k - rho_k.c_k + penalty]] (a_k: the party's share)",
    "model_share": "the coordinator's share of the party's weights: with its own, its weights",
    "validation_weight_share": "validation rows: the coordinator's share of the party's weights, encrypted [[c_k]]",
    "validation_scores": "validation rows: encrypted partial scores [[u_k]]",
    "validation_residual": "validation rows: encrypted residuals [[d]]",
    "validation_gradient_share": "validation rows: encrypted gradient plus the party's mask",
    "validation_loss_share": "validation rows: encrypted share of the loss",
    "validation_loss": "validation rows: encrypted loss less the coordinator's part: it learns the validation loss",
    "packed_gradient_share": "encrypted gradient products, packed, every slot masked: the coordinator keeps slot "
                             "s-1, X_k^T d + rho_k, as its share, the party -rho_k",
    "returned_gradient_share": "the coordinator's share of the party's gradient, encrypted afresh [[X_k^T d + rho_k]]",
    "validation_packed_scores": "validation rows: encrypted partial scores [[u_k]], packed",
    "validation_packed_residual": "validation rows: encrypted residuals [[d]], packed",
    "validation_packed_gradient_share": "validation rows: encrypted gradient products, packed, every slot masked",
    "validation_returned_gradient_share": "validation rows: the coordinator's share of the gradient, encrypted",
    # gradient boosting (SecureBoost): the label party holds the key
    "iteration": "a new boosting iteration; whether the feature parties take part in its trees",
    "gradients": "encrypted gradients and hessians [[g, h]], one packed ciphertext per row",
    "nodes": "the rows of each new node (a bit per row of the split node), and the nodes to evaluate",
    "round": "a new round: how many nodes' sums to compute (node membership hidden), or the tree's shape",
    "round_gradients": "encrypted gradients [[g, h, 1]] per row in its node's slot, zeros elsewhere",
    "candidates": "encrypted left sums [[G_L, H_L]] of its split candidates, shuffled, several per ciphertext",
    "split": "which of its candidates won at which node (positions in its shuffled order)",
    "partition": "which rows of the node go left at its split, and the split's column index",
    "validation_masks": "per validation row, the leaves its own splits allow (a bit per leaf)",
    "predict": "rows to score, and the trees holding this party's splits",
    "leaf_masks": "per row, the leaves its own splits allow in each tree (a bit per leaf)",
    # the credit-scoring pipeline: WOE/IV and selection (the label party holds the key), Pearson
    "pipeline_resume": "whether it has the checkpoint of WOE/IV and selection (and whether all resume from it)",
    "woe_start": "Paillier public key n of the label party, row and class counts, rows per chunk",
    "bins": "how many bins each of its columns has (a missing-value bin included)",
    "classes": "encrypted one-hot class [[1{y = c}]] per row, one packed ciphertext per row, a chunk of rows",
    "counts": "encrypted class counts [[sum 1{y = c}]] of every bin of every column, bins shuffled per column",
    "iv_kept": "which of its columns the IV rules keep (a bit per column)",
    "pearson_start": "Paillier public key n, row and column counts and the bits of its rounded standardized values",
    "pearson_columns": "its column count and the bits of its rounded standardized values",
    "pearson_rows": "encrypted standardized values [[z]], its columns side by side in one ciphertext per row",
    "pearson_products": "encrypted sums over rows [[sum z_a z_b]], one ciphertext per column of its own",
    "pearson": "the Pearson correlation matrix both parties learn",
    "own_correlation": "the correlations among its own IV-kept columns",
    "plan": "which of its columns are selected (with share_woe: every bin's WOE, shuffled order, and each IV)",
    "model_columns": "how many model columns its selected columns make (WOE values or bin indicators)",
}


def describe(message) -> tuple[str, int]:
    """A short description of ``message`` and how many numbers it carries."""
    count = sum(len(v) if isinstance(v, BigInts) else int(v.size)
                for v in message.fields.values() if isinstance(v, (BigInts, np.ndarray)))
    if isinstance(message.fields.get("bits"), bytes) and isinstance(message.fields.get("count"), int):
        count += message.fields["count"]            # a bit vector: one value per bit
    text = DESCRIPTIONS.get(message.name, message.name)
    if message.name == "hello" and "ids_salt" not in message.fields:
        text = "settings fingerprint"
    elif message.name == "hello" and "trained_with" in message.fields:
        text = "settings fingerprint, the shard's training fingerprint, row count and a salt for the row-id digest"
    if message.name == "schedule" and "seed" not in message.fields:
        text = "row count"
    if message.name == "start" and "n_trees" in message.fields:
        text = "the iteration to resume after, the validation rows' seed, row count and trees per iteration"
    if message.name == "resume" and "last_iteration" in message.fields:
        text = "the last iteration it completed"
    if message.name == "control" and set(message.fields) == {"stop"}:
        text = "continue or stop (the label party's validation score decides)"
    if message.name == "scores" and message.kind == "plaintext":
        text = "scores z"
    elif message.name == "scores" and message.kind == "masked":
        text = "decrypted scores, still masked: z + R"
    elif message.name == "packed_scores" and message.kind == "masked":
        text = "decrypted packed scores, still masked: Z + R"
    if isinstance(message.fields.get("slots"), int):
        text += f" ({message.fields['slots']} values per ciphertext)"
    return text, count


def message_table(transcript, receiver: str | None = None):
    """Every message of a transcript, described for a learner: what each party saw.

    Parameters
    ----------
    transcript : vfl.transport.Transcript
        Made with ``keep_payloads=True``: the description and the count of values
        are read from the messages themselves.
    receiver : str, optional
        Only the messages this party received: its view of the run.

    Returns
    -------
    pandas.DataFrame
        ``iteration, sender, receiver, name, kind, values, bytes, what``: ``values``
        is how many numbers the message carries and ``what`` says what they are
        (:func:`describe`), in the notation of Yang et al. 2019.

    Raises
    ------
    TypeError
        Not a Transcript (an estimator's ``transcript_`` table, say).
    ValueError
        The transcript did not keep its payloads.
    """
    if not hasattr(transcript, "keep_payloads"):
        raise TypeError(f"message_table takes a vfl.transport.Transcript recorded with keep_payloads=True, got a "
                        f"{type(transcript).__name__}: an estimator's transcript_ is a table of the messages' sizes "
                        "only. Record a run with vfl.inprocess.train(..., transcript=Transcript(keep_payloads=True)) "
                        "to read what each message holds")
    if not transcript.keep_payloads:
        raise ValueError("message_table reads the messages themselves: record them with "
                         "Transcript(keep_payloads=True)")
    frame = transcript.to_frame()
    described = [describe(message) for _, _, message in transcript.messages()]
    frame.insert(frame.columns.get_loc("bytes"), "values", [count for _, count in described])
    frame["what"] = [text for text, _ in described]
    if receiver is not None:
        frame = frame[frame["receiver"] == receiver].reset_index(drop=True)
    return frame


class Narrator:
    """Prints one line per message sent by ``role``; ``loss(epoch, value)`` prints the coordinator's loss.

    Parameters
    ----------
    role : str
        The party's name.
    total_epochs : int, optional
        Shown as ``epoch 3/30``.
    stream : file, optional
        Default: standard output, flushed after every line.
    phase : str
        How messages outside any epoch are labelled ("setup", "predict").
    """

    def __init__(self, role: str, total_epochs: int | None = None, stream=None, phase: str = "setup",
                 unit: str = "epoch"):
        self.role = role
        self.total = total_epochs
        self.stream = stream if stream is not None else sys.stdout
        self.phase = phase
        #: what the protocol's iterations are called: "epoch" (linear models) or "iteration" (boosting)
        self.unit = unit

    def __call__(self, direction: str, peer: str, message, nbytes: int) -> None:
        if direction != "->":
            return
        text, count = describe(message)
        values = f"{count} value{'s' if count != 1 else ''}, " if count else ""
        self.say(f"{self._when(message.iteration)}{self.role} -> {peer}  {message.name}: {text}  "
                 f"[{message.kind}, {values}{nbytes:,} bytes]")

    def batch_loss(self, epoch: int, batch: int, value: float) -> None:
        """The coordinator has just decrypted the loss of one batch."""
        self.say(f"epoch {self._epoch(epoch)}  {self.role} decrypts [[L]] of batch {batch + 1}: loss {value:.6f}")

    def loss(self, epoch: int, value: float) -> None:
        """The coordinator's loss over a whole epoch."""
        self.say(f"epoch {self._epoch(epoch)} done: {self.role}'s decrypted loss over the epoch: {value:.6f}")

    def say(self, text: str) -> None:
        print(f"[{self.role}] {text}", file=self.stream, flush=True)

    def _when(self, iteration: int) -> str:
        return f"{self.unit} {self._epoch(iteration)}  " if iteration >= 0 else f"{self.phase}  "

    def _epoch(self, epoch: int) -> str:
        return f"{epoch + 1}/{self.total}" if self.total else f"{epoch + 1}"
