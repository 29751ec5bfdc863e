"""The estimators' progress: a bar on a terminal or in a notebook, a plain line now and then in logs, pipes or CI.

Every estimator's ``verbose`` (scikit-learn's name) goes through :func:`progress_enabled`:
``True`` or ``False`` force the bar on or off; ``"auto"`` (the default) shows it when
standard error is a terminal or the code runs in a Jupyter notebook.  :class:`ProgressBar`
is the one bar they all use: a tqdm bar over epochs or iterations with the training loss
and tqdm's elapsed and remaining time.  Elsewhere ``"auto"`` writes a plain line to
standard error at most every :data:`LINE_INTERVAL` seconds (so a fit shorter than that
says nothing), for a script or a CI log to show a long fit is alive; ``False`` is silent.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from vfl.errors import ConfigurationError

#: ``verbose="auto"``: a bar on a terminal or in a notebook only.
AUTO = "auto"
#: ``verbose="auto"`` outside a terminal or notebook: seconds between two plain progress lines, at the most.
LINE_INTERVAL = 10.0
#: The lines' clock (a seam for the tests).
_clock = time.monotonic


def check_verbose(verbose) -> None:
    """Refuse a ``verbose`` that is neither a boolean nor ``"auto"`` (``"yes"`` is not one of them)."""
    if not isinstance(verbose, (bool, np.bool_)) and not (isinstance(verbose, str) and verbose == AUTO):
        raise ConfigurationError(f"verbose must be True, False or 'auto', got {verbose!r}")


def progress_enabled(verbose, stream=None) -> bool:
    """Whether ``fit`` shows a progress bar on ``stream`` (default: standard error).

    Parameters
    ----------
    verbose : bool or "auto"
        ``True`` or ``False`` decide; ``"auto"``: only if ``stream`` is a terminal or
        this is a Jupyter notebook (so captured output, pipes and CI get no bar).
    stream : file, optional
        Where the bar would go.

    Returns
    -------
    bool
    """
    check_verbose(verbose)
    if not isinstance(verbose, str):
        return bool(verbose)
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        terminal = bool(isatty and isatty())
    except ValueError:          # a closed stream
        terminal = False
    return terminal or in_notebook()


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's ZMQ shell), where tqdm draws its bar in the cell."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


class ProgressBar:
    """A bar over ``total`` steps with the loss, or nothing when :func:`progress_enabled` says no.

    Parameters
    ----------
    verbose : bool or "auto"
        See :func:`progress_enabled`.
    total : int
        The most steps the fit may take (it may stop early: the bar then stops short).
    desc : str
        The bar's title.
    unit : str
        What one step is ("epoch", "iteration").
    stream : file, optional
        Default: standard error.
    """

    def __init__(self, verbose, total: int, desc: str, unit: str, stream=None):
        self.bar = self.lines = None
        if progress_enabled(verbose, stream):
            self.bar = _tqdm(total, desc, unit, stream)
        elif isinstance(verbose, str):          # "auto" in a log, a pipe or CI: a line now and then
            self.lines = Lines(total, desc, unit, sys.stderr if stream is None else stream)

    @property
    def shown(self) -> bool:
        """Whether progress is shown, as a bar or as lines (so a loss worth computing for it)."""
        return self.bar is not None or self.lines is not None

    def step(self, loss: float | None = None) -> None:
        """One step is done; ``loss``: the training loss after it, if known."""
        if self.lines is not None:
            self.lines.step(loss)
        if self.bar is None:
            return
        self.bar.update(1)
        if loss is not None:
            self.bar.set_postfix(loss=f"{loss:.5f}")

    def close(self) -> None:
        """Take the bar down (it stays on screen, finished); the lines say the fit ended, if they said anything."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.lines is not None:
            self.lines.close()
            self.lines = None

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Lines:
    """Plain progress lines for a log: ``vfl training: epoch 3/30, loss 0.41234, 21 s``.

    A line after a step only once :data:`LINE_INTERVAL` seconds have passed since the start or the last
    line (so at most one per step: per epoch or iteration when they are slow); at the end, one more line
    if any was written.

    Parameters
    ----------
    total : int
    desc : str
    unit : str
    stream : file
    """

    def __init__(self, total: int, desc: str, unit: str, stream):
        self.total, self.desc, self.unit, self.stream = total, desc, unit, stream
        self.done, self.loss, self.said = 0, None, False
        self.started = self.last = _clock()

    def step(self, loss: float | None = None) -> None:
        """One step is done: a line if the last was long enough ago."""
        self.done += 1
        if loss is not None:
            self.loss = loss
        now = _clock()
        if now - self.last >= LINE_INTERVAL:
            self.last = now
            self._say(f"{self.unit} {self.done}/{self.total}", now)

    def close(self) -> None:
        """The fit has ended: a last line, if the log has heard of it."""
        if self.said:
            self._say(f"done, {self.done} {self.unit}{'s' if self.done != 1 else ''}", _clock())

    def _say(self, what: str, now: float) -> None:
        loss = f", loss {self.loss:.5f}" if self.loss is not None else ""
        try:
            print(f"{self.desc}: {what}{loss}, {now - self.started:.0f} s", file=self.stream, flush=True)
        except (OSError, ValueError):   # a closed or broken stream: progress is not worth failing a fit
            return
        self.said = True


def _tqdm(total: int, desc: str, unit: str, stream):
    """tqdm's text bar: on ``stream``, or in a notebook on one output of the cell (:class:`NotebookLine`)."""
    from tqdm.std import tqdm

    if in_notebook():
        return tqdm(total=total, desc=desc, unit=unit, file=NotebookLine(), ncols=100)
    return tqdm(total=total, desc=desc, unit=unit, file=stream, dynamic_ncols=True)


class NotebookLine:
    """A file for tqdm in a notebook: every redraw replaces the one output it keeps in the cell.

    IPython's ``display_id`` updates that output in place, so the saved notebook (nbclient's, a
    browser's) holds the bar's last state.  tqdm's widget would keep its first: the text saved with
    it stays at 0%, and its redraws to standard error would be kept one per output.
    """

    #: tqdm draws its bar in blocks on a file that says it takes UTF-8 (else in '#')
    encoding = "utf-8"

    def __init__(self):
        from IPython.display import display

        self.handle = display({"text/plain": ""}, raw=True, display_id=True)

    def write(self, text: str) -> None:
        line = text.replace("\r", "").strip("\n")
        if line.strip():
            self.handle.update({"text/plain": line}, raw=True)

    def flush(self) -> None:
        pass
