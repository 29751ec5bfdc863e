"""Shared fixtures for the horizontal FL tests (small, cached data sets)."""

import pytest

from vfl.horizontal import load_clients, load_dataset


@pytest.fixture(scope="session")
def digits():
    """Standardised digits split: X_train, X_test, y_train, y_test."""
    return load_dataset("digits", test_size=0.2, seed=0)


@pytest.fixture(scope="session")
def cancer():
    """Standardised breast-cancer split (binary labels)."""
    return load_dataset("breast_cancer", test_size=0.2, seed=0)


@pytest.fixture(scope="session")
def digits_clients():
    """Digits dealt to 20 clients by McMahan's pathological split, each with its own test rows."""
    return load_clients("digits", 20, "pathological", seed=0)
