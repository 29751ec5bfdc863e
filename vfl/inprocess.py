"""Run hand-built parties' protocol programs in one process, one thread each, over the in-process transport.

For teaching, the notebooks and the benchmarks, which build Yang et al.'s parties themselves and watch
each step.  The estimators do not use it: they run each family's run (:mod:`vfl.runs`) through
:mod:`vfl.runs.threads`, and ``vfl party`` runs the same programs as separate processes over TLS
(:mod:`vfl.federation`).  Frames cross as bytes exactly as on the network, so the
transcript's sizes are real.  Parties are named as the user named them (the
:class:`~vfl.protocols.Roster`); the defaults are Yang et al.'s A, B and C.

The caller's compute settings (its ``joblib.parallel_config``, ``n_jobs``) are
captured here and re-entered in every party's thread, so ``with
joblib.parallel_config(backend="dask"): train(...)`` sends the parties' encrypted
work to the Dask cluster (:mod:`vfl.crypto.compute`).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from vfl.parties import Coordinator
from vfl.parties.linear import FeatureParty
from vfl.parties.linear.packed import DEFAULT_SCORE_BOUND
from vfl.protocols import TWO_PARTY, Roster
from vfl.protocols.linear import TrainingSettings, predict_a, predict_b, predict_c, run_a, run_b, run_c
from vfl.protocols.linear import shared as shared_protocol
from vfl.protocols.linear.checks import check_run
from vfl.runs.threads import run_in_threads
from vfl.transport import Transcript


def train(parties: Mapping[str, FeatureParty], coordinator: Coordinator, settings: TrainingSettings,
          transcript: Transcript | None = None, engine=None, on_message=None, on_epoch=None,
          roster: Roster = TWO_PARTY, n_jobs=None) -> dict:
    """Train in-process; returns C's result (``loss_curve``, ``n_iter``, ``converged``).

    Parameters
    ----------
    parties : mapping of name to party
        Every data party of ``roster``: a :class:`~vfl.parties.PartyA` per feature
        party and the :class:`~vfl.parties.PartyB`, named as in ``roster``.  Refused
        (:func:`vfl.protocols.linear.checks.check_run`): other names, logistic targets other
        than -1/+1, a coordinator whose key size is not the settings'.
    on_epoch : callable, optional
        ``on_epoch(epoch, loss)`` as C completes each epoch.
    n_jobs : int or None
        Workers for the encrypted work (scikit-learn's meaning; see
        :func:`vfl.crypto.compute.capture`).
    """
    check_run(parties, roster, settings, coordinator)
    c_epoch = (lambda epoch, state: on_epoch(epoch, state["loss_curve"][-1])) if on_epoch else None
    programs = {name: (lambda ep, name=name: run_a(ep, parties[name], settings, engine=engine, roster=roster))
                for name in roster.features}
    programs[roster.label] = lambda ep: run_b(ep, parties[roster.label], settings, engine=engine,
                                           roster=roster)
    programs[roster.coordinator] = lambda ep: run_c(ep, coordinator, settings, on_epoch=c_epoch,
                                                 roster=roster)
    return run_in_threads(roster, programs, transcript, on_message, n_jobs)[roster.coordinator]


def predict(parties: Mapping[str, FeatureParty], coordinator: Coordinator, features: Mapping[str, np.ndarray],
            mode: str = "private", frac_bits: int = 32, transcript: Transcript | None = None, engine=None,
            roster: Roster = TWO_PARTY, packing: bool = False, score_bound: float | None = None,
            n_jobs=None, shared: bool = False) -> np.ndarray:
    """Scores ``z`` of new rows (``features`` by party name), as the label party learns them.

    ``packing`` runs the packed private prediction, its slots sized from the
    declared ``score_bound`` (default :data:`vfl.parties.linear.packed.DEFAULT_SCORE_BOUND`).
    ``shared`` scores a model that stayed shared (``reveal="never"``): each party
    holds its share (``party.share``) and the coordinator its own (``coordinator.shares``).
    ``n_jobs`` as for :func:`train`.
    """
    packed = {"packing": packing, "score_bound": DEFAULT_SCORE_BOUND if score_bound is None else score_bound}
    if shared:
        programs = {name: (lambda ep, name=name: shared_protocol.predict_a(ep, parties[name], features[name],
                                                                       frac_bits, engine, roster))
                    for name in roster.features}
        programs[roster.label] = lambda ep: shared_protocol.predict_b(ep, parties[roster.label],
                                                                   features[roster.label], frac_bits, engine, roster)
        programs[roster.coordinator] = lambda ep: shared_protocol.predict_c(ep, coordinator, roster)
    else:
        programs = {name: (lambda ep, name=name: predict_a(ep, parties[name], features[name], mode, frac_bits,
                                                       engine, roster, **packed))
                    for name in roster.features}
        programs[roster.label] = lambda ep: predict_b(ep, parties[roster.label], features[roster.label],
                                                   mode, frac_bits, engine, roster, **packed)
        programs[roster.coordinator] = lambda ep: predict_c(ep, coordinator, mode, roster, **packed)
    return run_in_threads(roster, programs, transcript, n_jobs=n_jobs)[roster.label]


def boost(parties: Mapping[str, object], settings, roster: Roster, transcript: Transcript | None = None,
          engine=None, on_message=None, n_jobs=None, on_iteration=None) -> dict:
    """Gradient boosting in-process (no coordinator); returns the label party's result.

    ``parties`` maps every data party's name to its
    :class:`~vfl.parties.trees.BoostingFeatureParty` or, for ``roster.label``, its
    :class:`~vfl.parties.trees.BoostingLabelParty`.  ``on_iteration(iteration,
    state)`` is called with the label party's state after each iteration.  The estimators
    run :mod:`vfl.runs.trees` instead, which builds and checks the parties from their data.
    """
    from vfl.protocols.trees import run_feature, run_label

    roster = roster.without_coordinator()
    programs = {name: (lambda ep, name=name: run_feature(ep, parties[name], settings, roster, engine=engine))
                for name in roster.features}
    programs[roster.label] = lambda ep: run_label(ep, parties[roster.label], settings, roster,
                                               on_iteration=on_iteration, engine=engine)
    return run_in_threads(roster, programs, transcript, on_message, n_jobs)[roster.label]


def predict_boosted(parties: Mapping[str, object], codes: Mapping[str, np.ndarray], roster: Roster,
                    transcript: Transcript | None = None, n_jobs=None) -> np.ndarray:
    """Raw scores (rows, trees per iteration) of new rows (``codes``: each party's binned rows), at the label party."""
    from vfl.protocols.trees import predict_feature, predict_label

    roster = roster.without_coordinator()
    programs = {name: (lambda ep, name=name: predict_feature(ep, parties[name], codes[name], roster))
                for name in roster.features}
    programs[roster.label] = lambda ep: predict_label(ep, parties[roster.label], codes[roster.label],
                                                   roster)
    return run_in_threads(roster, programs, transcript, n_jobs=n_jobs)[roster.label]


def woe(parties: Mapping[str, object], roster: Roster, key_bits: int = 2048, insecure: bool = False,
        transcript: Transcript | None = None, engine=None, n_jobs=None, chunk_rows: int | None = None) -> object:
    """The WOE/IV step in-process (no coordinator); returns the label party, its ``tables`` filled.

    ``parties`` maps every data party's name to its
    :class:`~vfl.parties.credit.feature_party.WOEFeatureParty` or, for ``roster.label``,
    its :class:`~vfl.parties.credit.label_party.WOELabelParty`.
    """
    from vfl.protocols.credit import run_feature, run_label
    from vfl.protocols.credit.woe import CHUNK_ROWS

    roster = roster.without_coordinator()
    programs = {name: (lambda ep, name=name: run_feature(ep, parties[name], roster, engine=engine))
                for name in roster.features}
    programs[roster.label] = lambda ep: run_label(ep, parties[roster.label], roster, key_bits, insecure,
                                               engine, chunk_rows or CHUNK_ROWS)
    return run_in_threads(roster, programs, transcript, n_jobs=n_jobs)[roster.label]


def select(parties: Mapping[str, object], features: Mapping[str, np.ndarray], roster: Roster, rules,
           share_woe: bool = False, transcript: Transcript | None = None, n_jobs=None) -> dict:
    """Selection in-process, after :func:`woe` on the same parties: every party's plan, ``{party: bool per column}``.

    ``features`` are every party's raw columns (for a correlation or VIF bound).
    """
    from vfl.protocols.credit import select_feature, select_label

    roster = roster.without_coordinator()
    programs = {name: (lambda ep, name=name: select_feature(ep, parties[name], roster, rules, features[name],
                                                        share_woe))
                for name in roster.features}
    programs[roster.label] = lambda ep: select_label(ep, parties[roster.label], roster, rules,
                                                  features[roster.label], share_woe)
    return run_in_threads(roster, programs, transcript, n_jobs=n_jobs)[roster.label]


def pearson(x_holder: np.ndarray, x_peer: np.ndarray, holder: str = "B", peer: str = "A", key_bits: int = 2048,
            insecure: bool = False, transcript: Transcript | None = None, engine=None, n_jobs=None) -> dict:
    """The encrypted Pearson correlations between two parties' columns in-process: each party's result, by name."""
    from vfl.crypto import Context, FixedPoint, generate_keypair
    from vfl.protocols.credit import pearson_holder, pearson_peer

    roster = Roster((peer,), holder, None)
    public, private = generate_keypair(key_bits, insecure=insecure)
    context = Context(public, FixedPoint(), private_key=private, engine=engine)
    programs = {holder: lambda ep: pearson_holder(ep, peer, context, x_holder),
                peer: lambda ep: pearson_peer(ep, holder, x_peer, peer, engine)}
    return run_in_threads(roster, programs, transcript, n_jobs=n_jobs)
