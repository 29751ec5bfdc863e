"""What a party shows its operator while it runs: the peers it waits for, the alignment, a bar per model.

:class:`Progress` writes to standard error, and by default only when standard
error is a terminal (``vfl party --progress`` / ``--no-progress`` force it on or
off), so logs and pipes get no redrawn bars.  Every line starts with
``party NAME:``.  While the federation forms: ``waiting for B, C…``, then
``connected to B, C``; the alignment line as soon as the rows in common are
known; then one bar per model over its epochs, with the loss at the coordinator
(the only party that learns it).
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
    """

    def __init__(self, role: str, enabled: bool | None = None, stream=None):
        self.role = role
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
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def waiting(self, peers) -> None:
        """The federation is forming: this party waits for ``peers``."""
        self.say(f"waiting for {', '.join(peers)}…")

    def connected(self, peers, seconds: float) -> None:
        self.say(f"connected to {', '.join(peers)} after {seconds:.1f} s")

    def model(self, epochs: int, index: int = 0, n_models: int = 1, what: str = "") -> None:
        """A new bar over ``epochs`` for model ``index`` of ``n_models`` (``what``: e.g. its class)."""
        if not self.enabled:
            return
        from tqdm.auto import tqdm

        self.close()
        which = f" model {index + 1}/{n_models}{what}" if n_models > 1 else ""
        self.bar = tqdm(total=epochs, desc=f"party {self.role}{which}", unit="epoch", file=self.stream,
                        dynamic_ncols=True)

    def epoch(self, epoch: int, loss: float | None = None) -> None:
        """Epoch ``epoch`` (from 0) is done; ``loss`` where this party knows it (the coordinator)."""
        if self.bar is None:
            return
        self.bar.update(max(0, epoch + 1 - self.bar.n))   # a resumed run starts after its checkpoint
        if loss is not None:
            self.bar.set_postfix(loss=f"{loss:.6f}")

    def close(self) -> None:
        """Take down the bar (it stays on screen, finished)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
