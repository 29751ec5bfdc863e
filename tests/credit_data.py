"""Generated credit-like tables: a bank (label party) and a telco (feature party) with a planted column; their
federation.toml with a ``[pipeline]`` table."""

import numpy as np
import pandas as pd

from vfl import VerticalDataset
from vfl.deploy.config import load_config, write_config

#: Short keys, acknowledged insecure: quick fits for tests.
KEYS = {"key_bits": 1024, "insecure": True}


def credit_frames(n=1500, seed=0, planted=1.0, classes=2):
    """``telco`` holds ``calls`` (planted: the strongest signal), ``tenure`` (weak), ``noise``; gaps in ``calls``.

    ``bank`` holds ``income``, ``utilization``, ``age`` and the label ``default`` ("yes"/"no").
    """
    rng = np.random.default_rng(seed)
    income = rng.lognormal(10, 0.5, n)
    utilization = rng.beta(2, 5, n)
    age = rng.integers(20, 70, n).astype(float)
    calls = rng.poisson(3, n).astype(float) + rng.normal(scale=0.3, size=n)
    tenure = rng.exponential(3, n)
    noise = rng.normal(size=n)
    logit = (-1.5 - 0.6 * np.log(income / 20000) + 2.0 * utilization - 0.01 * (age - 40)
             + planted * 0.6 * (calls - 3) - 0.15 * np.log1p(tenure))
    calls[rng.random(n) < 0.08] = np.nan
    if classes == 2:
        y = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    else:
        y = np.digitize(logit + rng.logistic(size=n), [-1.5, 0.0])
    bank = pd.DataFrame({"id": np.arange(n), "income": income, "utilization": utilization, "age": age,
                         "default": y})
    telco = pd.DataFrame({"id": np.arange(n), "calls": calls, "tenure": tenure, "noise": noise})
    return telco, bank


def credit_data(**kwargs):
    telco, bank = credit_frames(**kwargs)
    return VerticalDataset({"telco": telco, "bank": bank}, label="default", id_column="id")


def config(tmp_path, pipeline, training=None):
    """federation.toml of telco (feature party), bank (label party) and hub (coordinator) with ``[pipeline]``
    ``pipeline`` and ``[training]`` ``training`` (default: logistic regression), loaded."""
    parties = {name: {"role": role, "address": f"127.0.0.1:{7100 + i}", "certificate": "c.pem", "key": "c.key"}
               for i, (name, role) in enumerate({"telco": "feature", "bank": "label", "hub": "coordinator"}.items())}
    path = write_config(tmp_path / "federation.toml", "ca.pem", parties, training or {"model": "logistic"},
                        pipeline=pipeline)
    return load_config(path)
