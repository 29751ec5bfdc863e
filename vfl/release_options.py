"""The estimators' release options, one set for every family: who opts in, and differential privacy on releases.

Every estimator takes ``allow_reconstruction`` (the feature parties that release
per-row outputs even where their release check finds the label party could
rebuild their columns; ``allow_score_span`` is its earlier name, still read),
``release_epsilon``, ``release_delta`` and ``release_clip`` (differential privacy on
every feature party's releases, :mod:`vfl.protocols.release_dp`).  In-process every
feature party keeps its release ledger and noise key in this process, one per data
set of its own (:func:`scope`): a model's predictions count against the ledger its
training started.
"""

from __future__ import annotations

import hashlib

import numpy as np

from vfl.errors import ConfigurationError
from vfl.protocols.release import ReleasePolicy

PARAMETERS = {"allow_reconstruction": None, "release_epsilon": None, "release_delta": 1e-6, "release_clip": 4.0,
              "release_budget": 10.0}

DOC = """\
    allow_reconstruction : list of str or None, default=None
        Feature parties that release their per-row outputs (partial scores, split
        sides, a network's part) even where their release check finds that the label
        party, knowing some of their rows, could rebuild their columns.  Before any
        per-row output leaves it, each feature party runs the known attacks on its own
        rows and outputs (:mod:`vfl.protocols.release`), with every earlier release to
        this label party, and refuses if one rebuilds a column for more than 5% of rows
        beyond a constant guess; the refusal names the attack, the column, the share
        and this option.  ``vfl party`` reads ``allow_reconstruction = true`` from the
        party's own ``[parties.NAME]`` table.  ``allow_score_span`` is its earlier name.
    release_epsilon : float or None, default=None
        Differential privacy on every feature party's per-row releases: Gaussian noise
        (randomized response for split sides) drawn once per row and model version,
        so each row's release is (``release_epsilon``, ``release_delta``)-DP with
        respect to its values; the budget over versions composes in the party's
        ledger (see docs/threat_model.md for the price in AUC).
    release_delta : float, default=1e-6
    release_clip : float, default=4.0
        Each row's released values are clipped to this L2 norm before the noise.
    release_budget : float, default=10.0
        The total epsilon one label party may receive from a feature party over every
        DP version (composed in its ledger); a release beyond it is refused.
"""


def allowed(estimator, roster) -> tuple:
    """The feature parties named in ``allow_reconstruction`` (or its earlier name), checked."""
    named = []
    for option in ("allow_reconstruction", "allow_score_span"):
        value = getattr(estimator, option, None)
        if value is None:
            continue
        if isinstance(value, str) or not all(isinstance(p, str) for p in value):
            raise ConfigurationError(f"{option} must be None or a list of feature party names, got {value!r}")
        unknown = sorted(set(value) - set(roster.features))
        if unknown:
            raise ConfigurationError(f"{option} names {unknown}, which are not feature parties "
                                     f"{list(roster.features)}")
        named += list(value)
    return tuple(dict.fromkeys(named))


def check(estimator) -> None:
    """The DP options, checked before anything runs."""
    if getattr(estimator, "release_epsilon", None) is None:
        return
    from vfl.protocols.release_dp import check_parameters

    check_parameters(estimator.release_epsilon, estimator.release_delta, estimator.release_clip)


def scope(label_party: str, columns, features) -> str:
    """A feature party's in-process ledger is kept per data set (its columns and values) and label party."""
    x = np.ascontiguousarray(features, dtype=np.float64)
    digest = hashlib.sha256(repr((label_party, list(columns), x.shape)).encode() + x.tobytes())
    return digest.hexdigest()[:32]


def policy(estimator, name: str, scope_name: str, allowed_parties) -> ReleasePolicy:
    """Feature party ``name``'s policy in this process."""
    return ReleasePolicy.in_process(name, scope_name, allowed=name in allowed_parties,
                                    how=f"allow_reconstruction=[{name!r}]",
                                    epsilon=getattr(estimator, "release_epsilon", None),
                                    delta=getattr(estimator, "release_delta", 1e-6),
                                    clip=getattr(estimator, "release_clip", 4.0),
                                    budget=getattr(estimator, "release_budget", 10.0))


def viewed(estimator, name: str, policy: ReleasePolicy) -> ReleasePolicy:
    """Feature party ``name``'s policy as the estimator's owner views its releases: a scorecard checks its model's
    partial scores against the party's raw columns and bins (its ``_release_view(name, policy)``); else ``policy``."""
    view = estimator.__dict__.get("_release_view")
    return policy if view is None else view(name, policy)


def document(cls):
    """A class decorator: the estimator's docstring gets :data:`DOC` where it says ``<<release options...>>``."""
    lines = (cls.__doc__ or "").splitlines(keepends=True)
    cls.__doc__ = "".join(DOC if "<<release options" in line else line for line in lines)
    return cls
