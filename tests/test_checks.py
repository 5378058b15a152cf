"""The shared argument checks: one message shape per kind of value."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from synthenv.checks import (
    SEED_LIMIT,
    require_finite,
    require_finite_fields,
    require_seed,
    require_writable,
    resolve_device,
)
from synthenv.errors import UserError


@pytest.mark.parametrize(("value", "kwargs", "message"), [
    (float("nan"), {"low": 0}, r"entropy_coef must be a finite float in \[0, inf\), got nan"),
    (float("inf"), {"low": 0}, r"entropy_coef must be a finite float in \[0, inf\), got inf"),
    (-math.inf, {}, r"entropy_coef must be a finite float, got -inf"),
    (-0.1, {"low": 0}, r"in \[0, inf\), got -0.1"),
    (0.0, {"low": 0, "low_open": True}, r"in \(0, inf\), got 0.0"),
    (1.0, {"low": 0, "high": 1, "high_open": True}, r"in \[0, 1\), got 1.0"),
    (1.5, {"low": 0, "high": 1}, r"in \[0, 1\], got 1.5"),
    (-2.0, {"high": -3}, r"in \(-inf, -3\], got -2.0"),
])
def test_out_of_range_floats_are_value_errors(value, kwargs, message):
    with pytest.raises(ValueError, match=message):
        require_finite("entropy_coef", value, **kwargs)


@pytest.mark.parametrize("value", ["0.1", None, True, [0.1], 1j])
def test_non_numbers_are_type_errors(value):
    with pytest.raises(TypeError, match=r"lr must be a finite float in \(0, inf\), got .*\(" + type(value).__name__):
        require_finite("lr", value, low=0, low_open=True)


@pytest.mark.parametrize("value", [0.5, 1, np.float32(0.25), np.int64(1), 0])
def test_good_values_pass(value):
    require_finite("x", value, low=0, high=1)


def test_fields_of_a_config_with_a_prefix():
    class Config:
        lr, clip = 1e-3, float("nan")

    require_finite_fields(Config(), "lr", low=0)
    with pytest.raises(ValueError, match=r"ppo.clip must be a finite float in \[0, inf\), got nan"):
        require_finite_fields(Config(), "lr", "clip", low=0, prefix="ppo.")


def test_seeds_span_what_torch_generators_take():
    for seed in (0, SEED_LIMIT - 1, None):
        require_seed("seed", seed)
        if seed is not None:
            torch.Generator().manual_seed(seed)
    for seed in (-1, SEED_LIMIT, 2**70, 1.0, True, "3"):
        with pytest.raises(ValueError, match=r"seed must be None or an int in \[0, 2\*\*64\)"):
            require_seed("seed", seed)
    with pytest.raises(ValueError, match=r"seed must be an int in"):
        require_seed("seed", None, allow_none=False)


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu") == resolve_device(torch.device("cpu:0"))
    for bad in ("gpu", "cuda:x", "", 3.5):
        with pytest.raises(ValueError, match="device must be a torch device such as 'cpu'"):
            resolve_device(bad)
    with pytest.raises(ValueError, match="holds no data"):
        resolve_device("meta")
    if torch.cuda.is_available():
        assert resolve_device("cuda").index == torch.cuda.current_device()
        with pytest.raises(ValueError, match="does not exist: this machine has"):
            resolve_device(f"cuda:{torch.cuda.device_count()}")
    else:
        with pytest.raises(ValueError, match="'cuda:0' needs CUDA.*use device 'cpu' \\(--device cpu\\)"):
            resolve_device("cuda:0")


def test_require_writable_creates_folders_and_refuses_what_cannot_be_written(tmp_path):
    assert require_writable(tmp_path / "a" / "b" / "out.json", "--json") == tmp_path / "a" / "b" / "out.json"
    assert (tmp_path / "a" / "b").is_dir() and list((tmp_path / "a" / "b").iterdir()) == []  # no probe file left
    assert require_writable(tmp_path / "logs", "log dir", directory=True).is_dir()
    (tmp_path / "file").write_text("")
    a_file = f"'{tmp_path / 'file'}' is a file, not a folder"
    cases = [(tmp_path / "file" / "out.json", False, a_file), (tmp_path / "file" / "sub" / "out.json", False, a_file),
             (tmp_path, False, "folder, not a file"), (tmp_path / "file", True, "a file, not a folder")]
    for path, directory, reason in cases:
        with pytest.raises(UserError, match=f"--out '{path}' cannot be written: .*{reason}.*writable folder"):
            require_writable(path, "--out", directory=directory)
