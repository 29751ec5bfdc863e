"""Shared fixtures: key generation is slow, so each session makes one short teaching key."""

import pytest

from vertical_data import make_vertical
from vfl import VerticalDataset
from vfl.crypto import generate_keypair


@pytest.fixture(scope="session")
def keypair_1024():
    return generate_keypair(1024, insecure=True)


@pytest.fixture
def vertical_frames():
    return make_vertical()


@pytest.fixture
def vertical_data(vertical_frames):
    frame_a, frame_b, _, _ = vertical_frames
    return VerticalDataset({"A": frame_a, "B": frame_b}, label="y", id_column="id")
