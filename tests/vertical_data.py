"""Generated vertical data for the tests (a plain module, so test files can import it)."""

import numpy as np
import pandas as pd


def make_vertical(n_rows=80, n_a=3, n_b=2, task="logistic", seed=0, ids=True):
    """Generated data split by columns: party "A" features, party "B" features and label "y"."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, n_a + n_b))
    w = rng.normal(size=n_a + n_b)
    z = x @ w + 0.3
    y = (z + rng.normal(scale=0.5, size=n_rows) > 0).astype(int) if task == "logistic" else z + rng.normal(
        scale=0.1, size=n_rows)
    frame_a = pd.DataFrame(x[:, :n_a], columns=[f"a{j}" for j in range(n_a)])
    frame_b = pd.DataFrame(x[:, n_a:], columns=[f"b{j}" for j in range(n_b)])
    frame_b["y"] = y
    if ids:
        frame_a.insert(0, "id", np.arange(n_rows) + 1000)
        frame_b.insert(0, "id", np.arange(n_rows) + 1000)
    return frame_a, frame_b, x, y


def every_message(run):
    """Call ``run()`` with every transcript keeping its payloads; ``(run's result, [(sender, to, message), ...])``."""
    import pytest

    from vfl.transport import Transcript

    kept = []
    original = Transcript.__init__

    def keep_payloads(self, keep_payloads=False):
        original(self, keep_payloads=True)
        kept.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Transcript, "__init__", keep_payloads)
        result = run()
    return result, [m for t in kept for m in t.messages()]
