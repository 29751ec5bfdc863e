"""One line per protocol step, for a learner watching a party run.

A :class:`Narrator` is an ``Endpoint(on_message=...)`` hook.  Each message is
narrated once, by its sender: who sends what to whom, what kind of value it is
(``ciphertext``: Paillier-encrypted; ``masked``: decrypted but hidden by a
random mask only the receiver can remove; ``public``: harmless in clear;
``plaintext``: a value in clear that is not public), how many values and how
many bytes.  Lines start with ``[NAME]``, the party's name, so every party can
share one screen.  What each message carries is read from its family's table
(:mod:`vfl.protocols.messages`), by the sender's role: the board reads the same
(:func:`description`).  :func:`message_table` gives the same descriptions as a
table, for a notebook.
"""

from __future__ import annotations

import sys

import numpy as np

from vfl.protocols import messages as common
from vfl.protocols import explain, psi, psi_kkrt, psi_secretflow, psi_unbalanced
from vfl.families import FAMILIES as REGISTRY
from vfl.protocols.messages import lookup
from vfl.protocols.roster import TWO_PARTY, Roster
from vfl.transport.message import BigInts

#: Each family's table of what its messages carry (its registry entry's ``messages`` module; the alignment runs
#: only the shared messages).
FAMILIES = {**{name: family.module("messages").MESSAGES for name, family in REGISTRY.items()}, "alignment": {}}
#: The messages of every family: the private set intersection and the session's.
SHARED = (psi.MESSAGES, psi_kkrt.MESSAGES, psi_secretflow.MESSAGES, psi_unbalanced.MESSAGES, explain.MESSAGES,
          common.MESSAGES)
#: What a message no table describes is called: a gap to fill, said as such.
NOT_DESCRIBED = "not described"


def description(family: str, role: str, name: str, task: str = "train") -> str | None:
    """What message ``name`` carries when a ``role`` party sends it in a ``task`` run of ``family``.

    Read from the protocols' own tables (:mod:`vfl.protocols.messages`); ``None`` if none describes it.
    """
    for table in (FAMILIES.get(family, {}), *SHARED):
        text = lookup(table, role, name, task)
        if text:
            return text
    return None


def describe(message, family: str, role: str, task: str = "train") -> tuple[str, int]:
    """A short description of ``message``, sent by a ``role`` party in a ``task`` run of ``family``, and how many
    numbers it carries (:data:`NOT_DESCRIBED` if no table describes it)."""
    count = sum(len(v) if isinstance(v, BigInts) else int(v.size)
                for v in message.fields.values() if isinstance(v, (BigInts, np.ndarray)))
    if isinstance(message.fields.get("bits"), bytes) and isinstance(message.fields.get("count"), int):
        count += message.fields["count"]            # a bit vector: one value per bit
    text = description(family, role, message.name, task) or NOT_DESCRIBED
    if isinstance(message.fields.get("slots"), int):
        text += f" ({message.fields['slots']} values per ciphertext)"
    return text, count


def message_table(transcript, receiver: str | None = None, family: str = "linear", roster: Roster = TWO_PARTY,
                  task: str = "train"):
    """Every message of a transcript, described for a learner: what each party saw.

    Parameters
    ----------
    transcript : vfl.transport.Transcript
        Made with ``keep_payloads=True``: the description and the count of values
        are read from the messages themselves.
    receiver : str, optional
        Only the messages this party received: its view of the run.
    family : {"linear", "trees", "credit", "mlp", "alignment"}
        The run's family: whose table of messages describes them.
    roster : vfl.protocols.Roster
        Who played which role (default: feature party A, label party B, coordinator C).
    task : str
        ``"train"``, ``"predict"`` or ``"align"``.

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
    roles = {**{k: "feature" for k in roster.features}, roster.label: "label", roster.coordinator: "coordinator"}
    described = [describe(message, family, roles.get(sender, ""), task) for sender, _, message in transcript.messages()]
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
        How messages outside any epoch are labelled ("setup", "predict", "align"); also the task whose
        descriptions it reads (:func:`description`: "predict", "align", else "train").
    unit : str
        What an iteration is called ("epoch", "iteration").
    family : str
        The run's family, whose table describes the messages.
    kind : str
        The party's role: "feature", "label" or "coordinator".
    """

    def __init__(self, role: str, total_epochs: int | None = None, stream=None, phase: str = "setup",
                 unit: str = "epoch", *, family: str, kind: str):
        self.role = role
        self.family, self.kind = family, kind
        self.task = {"predict": "predict", "align": "align"}.get(phase, "train")
        self.total = total_epochs
        self.stream = stream if stream is not None else sys.stdout
        self.phase = phase
        #: what the protocol's iterations are called: "epoch" (linear models) or "iteration" (boosting)
        self.unit = unit

    def __call__(self, direction: str, peer: str, message, nbytes: int) -> None:
        if direction != "->":
            return
        text, count = describe(message, self.family, self.kind, self.task)
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
