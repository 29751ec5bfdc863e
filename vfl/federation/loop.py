"""What every ``vfl party`` and ``vfl predict`` run does around its family's protocol, written once.

A family's ``train`` or ``predict`` (its module in :data:`vfl.families.FAMILIES`) loads its party's rows,
then runs inside :func:`party_run`, which

* clears this party's checkpoints unless it resumes, and keeps them tied to the digest of its aligned rows;
* opens the party's session (mutual TLS to its peers, :class:`~vfl.deploy.session.Session`) with its
  narration and progress;
* exchanges the ``hello``: the row count, column count and salt of a data party, the run id the label
  party gives a training run (which checkpoints belong to it), the fingerprint of the model a prediction
  uses;
* aligns the rows by private set intersection and says so, and before a prediction checks that every party
  holds a shard of the same training;
* saves the transcript of what the party sent when the family's part is done, and closes the progress line
  whatever happens (a failure on the way is told to the peers by the session).

The family's code in between sees a :class:`PartyRun`: the session's endpoint, the aligned rows, what the
peers said, the checkpoint store, the narrator and the progress line.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from vfl.deploy.align import alignment_line
from vfl.deploy.checkpoint import CheckpointStore, data_digest, run_id
from vfl.deploy.config import FederationConfig
from vfl.deploy.data import PartyData
from vfl.deploy.narration import Narrator
from vfl.deploy.progress import Progress
from vfl.deploy.session import Session, align_data, check_same_training, rows_hello
from vfl.transport import Endpoint


@dataclass
class PartyRun:
    """One party's run in progress: what its family's code needs from the session around it."""

    config: FederationConfig
    role: str
    #: ``"feature"``, ``"label"`` or ``"coordinator"``
    kind: str
    #: ``"train"`` or ``"predict"``
    task: str
    workdir: Path
    session: Session
    #: the party's rows of the intersection, in the order every party shares (None: the coordinator)
    data: PartyData | None
    #: every data party's row count and the shared count, or None (``align = "same-ids"``, the coordinator)
    alignment: dict | None
    #: each peer's hello fields
    theirs: dict
    #: the fingerprint of the training run (training: this run's; prediction: the shard's)
    trained_with: str
    store: CheckpointStore | None
    narrator: Narrator | None
    shown: Progress
    #: the transcript's path, once the family's part is done
    transcript: str | None = field(default=None)

    @property
    def endpoint(self) -> Endpoint:
        return self.session.endpoint

    def summary(self, **more) -> dict:
        """The summary every family's run returns: the party, its role, the alignment and transcript, and ``more``."""
        out = {"party": self.role, "role": self.kind}
        if self.alignment:
            out["alignment"] = self.alignment
        if self.transcript is not None:
            out["transcript"] = self.transcript
        out.update(more)
        return out


@contextmanager
def party_run(config: FederationConfig, role: str, task: str, data: PartyData | None, workdir, *,
              resume: bool = False, narrate: bool = False, progress: bool | None = False, record=None,
              min_rows: int = 1, trained_with: str | None = None, checkpoints: bool = True):
    """Party ``role``'s session for ``task`` (``"train"`` or ``"predict"``), its rows aligned; yields a
    :class:`PartyRun` and saves the transcript after it.

    Parameters
    ----------
    data : PartyData or None
        The party's rows as read from its CSV (None: the coordinator).
    min_rows : int
        The fewest shared rows the family can train on (alignment refuses fewer).
    trained_with : str, optional
        ``"predict"``: the training fingerprint of the shard the party scores with.
    checkpoints : bool
        ``"train"``: whether this run keeps its checkpoints in ``WORKDIR/checkpoints`` (the linear family keeps
        one folder per model itself).
    """
    kind, workdir = config.role_of(role), Path(workdir)
    store = None
    if task == "train" and checkpoints:
        store = CheckpointStore(workdir / "checkpoints", role, config.fingerprint("train"))
        if not resume:
            store.clear()
    narrator = None
    if narrate:
        family = config.family.name
        narrator = (Narrator(role, config.training.max_iter, unit=config.family.unit, family=family, kind=kind) if task == "train"
                    else Narrator(role, phase=task, family=family, kind=kind))
    shown = Progress(role, progress, record=record)
    try:
        with Session(config, role, task, narrator, shown) as session:
            if task == "train":
                extra = dict(rows_hello(data), n_columns=len(data.columns)) if data else None
                theirs = session.hello(extra, run_id(workdir / "checkpoints", resume) if kind == "label" else None)
                trained_with = session.trained_with
            else:
                extra = dict(rows_hello(data), trained_with=trained_with) if data else None
                theirs = session.hello(extra)
            alignment = None
            if data:
                data, alignment = align_data(session, role, data, extra, theirs, narrator, min_rows, workdir)
                if alignment:
                    shown.line(alignment_line(role, alignment))
                if task == "predict":
                    check_same_training(role, config.roster, theirs, trained_with)
            if store is not None:
                store.data = data_digest(data)
            run = PartyRun(config, role, kind, task, workdir, session, data, alignment, theirs, trained_with, store,
                           narrator, shown)
            yield run
            run.transcript = str(session.save_transcript(workdir / f"transcript_{task}.csv"))
    finally:
        shown.close()
