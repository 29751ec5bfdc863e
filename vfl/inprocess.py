"""Run the three roles in one process, one thread each, over the in-process transport.

The estimators use this; the same role programs run as separate processes over TLS
in :mod:`vfl.federation`.  Frames cross as bytes exactly as on the network, so the
transcript's sizes are real.
"""

from __future__ import annotations

import numpy as np

from vfl.parties import Coordinator, PartyA, PartyB
from vfl.protocols import TrainingSettings, predict_a, predict_b, predict_c, run_a, run_b, run_c
from vfl.transport import Endpoint, InProcessNetwork, Transcript, run_roles

ROLES = ("A", "B", "C")


def _endpoints(transcript: Transcript, on_message=None) -> tuple[InProcessNetwork, dict[str, Endpoint]]:
    network = InProcessNetwork(ROLES)
    endpoints = {r: Endpoint(network.transport(r), [p for p in ROLES if p != r], transcript, on_message=on_message)
                 for r in ROLES}
    return network, endpoints


def train(party_a: PartyA, party_b: PartyB, coordinator: Coordinator, settings: TrainingSettings,
          transcript: Transcript | None = None, engine=None, on_message=None, on_epoch=None) -> dict:
    """Train in-process; returns C's result (``loss_curve``, ``n_iter``, ``converged``).

    ``on_epoch(epoch, loss)`` is called as C completes each epoch.
    """
    transcript = transcript if transcript is not None else Transcript()
    network, ep = _endpoints(transcript, on_message)
    c_epoch = (lambda epoch, state: on_epoch(epoch, state["loss_curve"][-1])) if on_epoch else None
    results = run_roles(network, {
        "A": lambda: run_a(ep["A"], party_a, settings, engine=engine),
        "B": lambda: run_b(ep["B"], party_b, settings, engine=engine),
        "C": lambda: run_c(ep["C"], coordinator, settings, on_epoch=c_epoch),
    })
    return results["C"]


def predict(party_a: PartyA, party_b: PartyB, coordinator: Coordinator, features_a, features_b,
            mode: str = "private", frac_bits: int = 32, transcript: Transcript | None = None,
            engine=None) -> np.ndarray:
    """Scores ``z`` of new rows, as party B learns them."""
    transcript = transcript if transcript is not None else Transcript()
    network, ep = _endpoints(transcript)
    results = run_roles(network, {
        "A": lambda: predict_a(ep["A"], party_a, features_a, mode, frac_bits, engine),
        "B": lambda: predict_b(ep["B"], party_b, features_b, mode, frac_bits, engine),
        "C": lambda: predict_c(ep["C"], coordinator, mode),
    })
    return results["B"]
