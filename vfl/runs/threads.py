"""Every role of a run in one process, one thread each, over the in-process transport.

Frames cross as bytes exactly as on the network, so the transcript's sizes are
real.  The caller's compute settings (its ``joblib.parallel_config``,
``n_jobs``) are captured here and re-entered in every role's thread, so ``with
joblib.parallel_config(backend="dask"): model.fit(data)`` sends the parties'
encrypted work to the Dask cluster (:mod:`vfl.crypto.compute`).
"""

from __future__ import annotations

from typing import Callable, Mapping

from vfl.crypto import compute
from vfl.protocols import Roster
from vfl.transport import Endpoint, InProcessNetwork, Transcript, run_roles


def run_in_threads(roster: Roster, programs: Mapping[str, Callable[[Endpoint], object]],
                   transcript: Transcript | None = None, on_message=None, n_jobs=None) -> dict[str, object]:
    """Run ``programs[name](endpoint)`` for every party of ``roster``, each in its own thread.

    Parameters
    ----------
    roster : Roster
        Who plays which role; every name in it must have a program.
    programs : mapping of party name to callable
        Each takes the party's :class:`~vfl.transport.Endpoint` and returns its result.
    transcript : Transcript, optional
        Where every message is recorded (a fresh one if not given).
    on_message : callable, optional
        Called with every message as it is sent (narration).
    n_jobs : int or None
        Workers for the encrypted work (scikit-learn's meaning; :func:`vfl.crypto.compute.capture`).

    Returns
    -------
    dict
        Each party's result, by name.  The first failure is re-raised (its root cause, not the
        peers' reactions to it).
    """
    plan = compute.capture(n_jobs)
    transcript = transcript if transcript is not None else Transcript()
    network = InProcessNetwork(roster.everyone)
    endpoints = {name: Endpoint(network.transport(name), roster.peers(name), transcript, on_message=on_message)
                 for name in roster.everyone}
    bound = {name: compute.bind(lambda name=name: programs[name](endpoints[name]), plan) for name in roster.everyone}
    return run_roles(network, bound)
