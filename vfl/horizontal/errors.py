"""Exceptions raised by :mod:`vfl.horizontal`.

Every exception here subclasses :class:`FederatedInputError`, which itself
subclasses :class:`ValueError`, so ``except ValueError`` keeps working for
callers that do not care about the details.  Messages name the offending
client (by its index in the list passed to ``fit``) and the shapes involved.
"""

from __future__ import annotations

__all__ = [
    "FederatedInputError",
    "EmptyClientError",
    "ShapeMismatchError",
    "LabelError",
    "InvalidParameterError",
    "PartitionError",
]


class FederatedInputError(ValueError):
    """Base class for bad input to the horizontal federated learning code."""


class EmptyClientError(FederatedInputError):
    """A client holds no training examples (or no client was given)."""


class ShapeMismatchError(FederatedInputError):
    """Arrays do not have the shapes they must have.

    Raised when ``X`` is not two-dimensional, when ``X`` and ``y`` of one client
    differ in length, when two clients disagree on the number of features, or
    when parameter vectors passed to an aggregator differ in length.
    """


class LabelError(FederatedInputError):
    """Labels are unusable: fewer than two classes, or unknown classes."""


class InvalidParameterError(FederatedInputError):
    """A hyperparameter is outside its valid range (e.g. C outside (0, 1])."""


class PartitionError(FederatedInputError):
    """A data set cannot be split as requested (e.g. more clients than rows)."""
