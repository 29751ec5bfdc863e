"""The README's Python example runs as written (2048-bit keys) and does what it says."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_quickstart_runs_as_written(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "the README has no Python example"
    namespace = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    model, y = namespace["model"], namespace["y"]
    assert np.isfinite(model.intercept_) and 1 < model.n_iter_ <= 31 + 10 and model.solver_ == "cg"
    assert model._coordinator.context.public_key.key_bits == 2048
    assert set(model.coef_) == {"A", "B"} and model.coef_["A"].shape == (20,)
    auc, accuracy = map(float, capsys.readouterr().out.split())
    assert auc > 0.98 and accuracy > 0.9
    assert namespace["proba"].shape == y.shape and np.all((namespace["proba"] > 0) & (namespace["proba"] < 1))


def test_readme_federation_toml_loads_as_written(tmp_path):
    """The README's federation.toml is a whole file: vfl party reads it as written, and the [training] it
    leaves out means the defaults (logistic regression, full batches, 2048-bit keys)."""
    from vfl.deploy.config import load_config
    from vfl.protocols.linear.settings import TrainingSettings

    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    snippet = next(b for b in blocks if "[parties." in b)
    (tmp_path / "federation.toml").write_text(snippet)
    config = load_config(tmp_path / "federation.toml")
    roles = {name: entry.role for name, entry in config.parties.items()}
    assert roles == {"bank": "label", "telco": "feature", "shop": "feature", "C": "coordinator"}
    assert config.training == TrainingSettings() and config.training.batch_size is None
    assert config.training.key_bits == 2048 and config.label == "default"
    assert config.ca == tmp_path / "certs" / "ca.pem"
