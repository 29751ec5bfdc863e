"""What a party shows its operator while it runs: the peers it waits for, the alignment, a bar per model.

:class:`Progress` writes to standard error, and by default only when standard
error is a terminal (``vfl party --progress`` / ``--no-progress`` force it on or
off), so logs and pipes get no redrawn bars.  Every line starts with
``party NAME:``.  While the federation forms: ``waiting for B, C…``, then
``connected to B, C``; the alignment line as soon as the rows in common are
known; then one bar per model over its epochs, with the loss at the coordinator
(the only party that learns it).

With a ``record`` (:class:`vfl.deploy.record.RunRecord`) every one of these is also an
event in the party's run record, shown or not: what ``vfl board`` draws live.
"""

from __future__ import annotations

import sys


class Progress:
    """Progress lines and bars for party ``role`` on ``stream`` (standard error).

    Parameters
    ----------
    role : str
        The party's name.
    enabled : bool, optional
        ``None`` (default): only if ``stream`` is a terminal.
    stream : file, optional
        Default: standard error.
    record : vfl.deploy.record.RunRecord, optional
        Where every step is also written as an event.
    """

    def __init__(self, role: str, enabled: bool | None = None, stream=None, record=None):
        self.role = role
        self.record = record
        self.model_index = 0
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.bar = None

    def say(self, text: str) -> None:
        """One line ``party NAME: text``, above the bar if there is one."""
        self.line(f"party {self.role}: {text}")

    def line(self, line: str) -> None:
        """One line as it is (it names the party already), above the bar if there is one."""
        if self.record is not None and line:
            self.record.event("line", text=line)
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def waiting(self, peers) -> None:
        """The federation is forming: this party waits for ``peers``."""
        if self.record is not None:
            self.record.event("waiting", peers=list(peers))
        self.say(f"waiting for {', '.join(peers)}…")

    def connected(self, peers, seconds: float) -> None:
        if self.record is not None:
            self.record.event("connected", peers=list(peers), seconds=round(seconds, 3))
        self.say(f"connected to {', '.join(peers)} after {seconds:.1f} s")

    def model(self, epochs: int, index: int = 0, n_models: int = 1, what: str = "") -> None:
        """A new bar over ``epochs`` for model ``index`` of ``n_models`` (``what``: e.g. its class)."""
        self.model_index = index
        if self.record is not None:
            self.record.event("model", index=index, models=n_models, epochs=epochs, what=what)
        if not self.enabled:
            return
        from tqdm.auto import tqdm

        self.close()
        which = f" model {index + 1}/{n_models}{what}" if n_models > 1 else ""
        self.bar = tqdm(total=epochs, desc=f"party {self.role}{which}", unit="epoch", file=self.stream,
                        dynamic_ncols=True)

    def epoch(self, epoch: int, loss: float | None = None) -> None:
        """Epoch ``epoch`` (from 0) is done; ``loss`` where this party knows it (the coordinator)."""
        if self.record is not None:
            self.record.event("epoch", model=self.model_index, epoch=epoch,
                              **({} if loss is None else {"loss": float(loss)}))
        if self.bar is None:
            return
        self.bar.update(max(0, epoch + 1 - self.bar.n))   # a resumed run starts after its checkpoint
        if loss is not None:
            self.bar.set_postfix(loss=f"{loss:.6f}")

    def step(self, name: str) -> None:
        """A step of the run begins that no message names (a party's own work: statistics, binning): recorded only."""
        if self.record is not None:
            self.record.event("step", name=name)

    def message(self, direction: str, peer: str, message, nbytes: int) -> None:
        """A message sent or received (the session's hook): only recorded, never shown."""
        if self.record is not None:
            self.record.message(direction, peer, message, nbytes)

    def close(self) -> None:
        """Take down the bar (it stays on screen, finished)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
