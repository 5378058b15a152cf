"""Shared test configuration: hypothesis profile, markers, oracle caches."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile(
    "synthenv",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "synthenv"))

torch.set_num_threads(max(1, min(2, torch.get_num_threads())))


def pytest_collection_modifyitems(config, items):
    has_cuda = torch.cuda.is_available()
    for item in items:
        if "cuda" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)"))
