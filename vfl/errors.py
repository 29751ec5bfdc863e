"""The project's exceptions: one hierarchy, so callers can catch ``VFLError``.

Errors about bad input subclass ``ValueError`` (as scikit-learn raises there);
faults while running a federation (a peer gone, a timeout, a refused handshake)
subclass ``RuntimeError``.  Every message names what is wrong: the party, the
column, the row, or the protocol step.
"""


class VFLError(Exception):
    """Base class of every error raised by vfl."""


class DataError(VFLError, ValueError):
    """Input data that cannot be trained on: wrong shape, NaN, ids that differ..."""


class ConfigurationError(VFLError, ValueError):
    """A setting that is invalid or unsafe (a short key without the insecure flag...)."""


class FixedPointOverflowError(VFLError, ValueError):
    """A value does not fit the fixed-point range of the plaintext space."""


class NotFittedError(VFLError, ValueError, AttributeError):
    """A model was used for prediction before ``fit``."""


class ProtocolError(VFLError, RuntimeError):
    """A message that breaks the protocol: malformed, unexpected, oversized."""


class PeerError(VFLError, RuntimeError):
    """A peer is gone, timed out, or failed; the message names the peer and the step."""


class PeerStopped(PeerError):
    """A peer stopped on its own error and said so (an ``abort``), directly or passed on by another peer.

    Attributes
    ----------
    party : str or None
        The party that stopped first (as its abort names it; ``None`` if it named none).
    category : str or None
        What stopped it, as it says: ``"data"``, ``"settings"``, ``"network"``, ``"system"``,
        ``"interrupted"`` or ``"internal"``.
    reason : str
        Its own one-line account, without any of its values.
    """

    def __init__(self, message: str, party: str | None = None, category: str | None = None, reason: str = ""):
        super().__init__(message)
        self.party, self.category, self.reason = party, category, reason

    def __reduce__(self):
        return type(self), (str(self), self.party, self.category, self.reason)


class HandshakeError(PeerError):
    """A connection refused at the TLS handshake or at the settings check."""


class DivergenceError(VFLError, ArithmeticError):
    """Training diverges: the loss is no longer finite, or keeps growing (lower the learning rate)."""


class ComputeError(VFLError, RuntimeError):
    """A party's own compute backend (its Dask cluster, a joblib backend) failed or cannot be reached."""


class LabelLeakWarning(VFLError, UserWarning):
    """Settings under which a party can infer what the protocol does not hand it (mini-batch labels...)."""


class ConstantColumnWarning(VFLError, UserWarning):
    """A column with one value in every training row was dropped from the model (its weight is 0)."""


class NoBetterThanChanceWarning(VFLError, UserWarning):
    """A fit ended no better than a constant prediction: it learned nothing from the columns."""


def file_problem(path) -> str | None:
    """Why ``path`` cannot be read as a file: ``"does not exist"``, ``"is a directory"``, ``"is not a regular file
    (a FIFO, a socket or a device)"``; None for a regular file (opening a FIFO would wait for a writer)."""
    import os
    import stat

    if not isinstance(path, (str, bytes, os.PathLike)):
        return None                     # an open file or a buffer: read as it is
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a FIFO, a socket or a device)"
    return None
