"""The estimators' progress bar: shown by default on a terminal or in a notebook, never in logs, pipes or CI.

Every estimator's ``verbose`` (scikit-learn's name) goes through :func:`progress_enabled`:
``True`` or ``False`` force the bar on or off; ``"auto"`` (the default) shows it when
standard error is a terminal or the code runs in a Jupyter notebook.  :class:`ProgressBar`
is the one bar they all use: a tqdm bar over epochs or iterations with the training loss
and tqdm's elapsed and remaining time.
"""

from __future__ import annotations

import sys

import numpy as np

from vfl.errors import ConfigurationError

#: ``verbose="auto"``: a bar on a terminal or in a notebook only.
AUTO = "auto"


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
        self.bar = None
        if progress_enabled(verbose, stream):
            self.bar = _tqdm_class()(total=total, desc=desc, unit=unit, file=stream, dynamic_ncols=True)

    @property
    def shown(self) -> bool:
        """Whether the bar is on screen (so a loss worth computing for it)."""
        return self.bar is not None

    def step(self, loss: float | None = None) -> None:
        """One step is done; ``loss``: the training loss after it, if known."""
        if self.bar is None:
            return
        self.bar.update(1)
        if loss is not None:
            self.bar.set_postfix(loss=f"{loss:.5f}")

    def close(self) -> None:
        """Take the bar down (it stays on screen, finished)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _tqdm_class():
    """tqdm's notebook widget in a notebook that has ipywidgets, its text bar everywhere else."""
    if in_notebook():
        try:
            from tqdm.notebook import IProgress, tqdm as notebook_tqdm
            if IProgress is not None:
                return notebook_tqdm
        except ImportError:
            pass
    from tqdm.std import tqdm
    return tqdm
