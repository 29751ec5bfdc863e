"""Shared fixtures: key generation is slow, so each session makes one short teaching key."""

import pytest

from vfl.crypto import generate_keypair


@pytest.fixture(scope="session")
def keypair_1024():
    return generate_keypair(1024, insecure=True)
