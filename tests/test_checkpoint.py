"""Checkpoints are untrusted files: every bad file is one ``CheckpointError``, nothing in it runs."""

from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

from synthenv.checkpoint import CheckpointError, load_checkpoint, require_keys, save_checkpoint
from synthenv.errors import UserError


def realistic_state() -> dict:
    """What a training checkpoint holds: nested dicts of tensors and plain Python values."""
    torch.manual_seed(0)
    model = torch.nn.LSTM(4, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 1, 4))[0].sum().backward()
    optimizer.step()
    return {
        "config": {"task": "reverse", "seeds": [0, 1], "max_len": 100, "log_dir": None, "progress": True,
                   "lr": 1e-3, "algo_config": "PPOConfig(...)", "pair": (1, 2.5)},
        "algorithm": {"policy": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "generators": [torch.Generator().manual_seed(s).get_state() for s in (0, 1)],
                      "queue": {"tokens": torch.zeros(4, 10, dtype=torch.int64), "rewards": torch.rand(4)}},
        "step_count": 7, "elapsed": 1.25, "run_dirs": ["runs/a", None], "solved": False,
        "best_tokens": torch.randint(0, 9, (2, 10)), "half": torch.ones(3, dtype=torch.bfloat16),
    }


def assert_same(a, b) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        assert a == b and type(a) is type(b)


def test_round_trip_keeps_every_value_and_creates_folders(tmp_path):
    state = realistic_state()
    path = tmp_path / "deep" / "er" / "run.pt"
    save_checkpoint(path, state)
    loaded = load_checkpoint(path, "cpu", required_keys=("config", "algorithm"))
    assert_same(state, loaded)
    generator = torch.Generator()
    generator.set_state(loaded["algorithm"]["generators"][1])  # a generator state restores
    assert torch.equal(torch.rand(3, generator=generator), torch.rand(3, generator=torch.Generator().manual_seed(1)))
    assert [p.name for p in path.parent.iterdir()] == ["run.pt"]  # no temporary file left behind


def test_save_replaces_atomically_and_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "run.pt"
    save_checkpoint(path, {"step": 1})
    with pytest.raises(CheckpointError, match=r"state\['algorithm'\]\['bad'\] is a numpy.int64"):
        save_checkpoint(path, {"step": 2, "algorithm": {"bad": np.int64(3)}})
    assert load_checkpoint(path)["step"] == 1
    save_checkpoint(path, {"step": 3})
    assert load_checkpoint(path)["step"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pt"]


def test_unwritable_paths_are_one_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match=r"cannot write checkpoint .*file/sub/run.pt.*writable folder"):
        save_checkpoint(tmp_path / "file" / "sub" / "run.pt", {"step": 1})
    (tmp_path / "folder").mkdir()
    with pytest.raises(CheckpointError, match="cannot write checkpoint"):
        save_checkpoint(tmp_path / "folder", {"step": 1})
    with pytest.raises(CheckpointError, match="dict of plain data"):
        save_checkpoint(tmp_path / "x.pt", [1, 2])


def _bad_files(tmp_path) -> dict[str, os.PathLike]:
    good = tmp_path / "good.pt"
    save_checkpoint(good, realistic_state())
    data = good.read_bytes()
    files = {"missing": tmp_path / "missing.pt", "folder": tmp_path}
    contents = {
        "empty": b"",
        "text": b"step = 3\nthis is not a checkpoint\n",
        "truncated": data[: len(data) // 2],
        "truncated_tail": data[:-10],
        "plain_pickle": pickle.dumps({"step": 1}),
    }
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10  # inside the tensor data: torch.load alone returns a wrong tensor
    contents["byte_flipped"] = bytes(flipped)
    other_zip = io.BytesIO()
    with zipfile.ZipFile(other_zip, "w") as archive:
        archive.writestr("readme.txt", "a zip, but not a torch file")
    contents["other_zip"] = other_zip.getvalue()
    for name, content in contents.items():
        files[name] = tmp_path / f"{name}.pt"
        files[name].write_bytes(content)
    list_file = tmp_path / "list.pt"
    torch.save([1, 2, 3], list_file)
    files["not_a_dict"] = list_file
    return files


@pytest.mark.parametrize("kind", ["missing", "folder", "empty", "text", "truncated", "truncated_tail", "plain_pickle",
                                  "byte_flipped", "other_zip", "not_a_dict"])
def test_every_bad_file_is_one_checkpoint_error(tmp_path, kind):
    path = _bad_files(tmp_path)[kind]
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(path)
    message = str(error.value)
    assert str(path) in message and "start a fresh run" in message and "\n" not in message
    assert isinstance(error.value, UserError) and isinstance(error.value, ValueError)


def test_a_byte_flip_loads_silently_with_torch_alone(tmp_path):
    """Why the CRC check exists: torch.load returns the flipped tensor without an error."""
    path = _bad_files(tmp_path)["byte_flipped"]
    state = torch.load(path, weights_only=True)
    assert isinstance(state, dict)  # loads, with some value silently wrong


class _RunsCode:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy-pickle"])
def test_a_malicious_pickle_does_not_run(tmp_path, legacy):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    payload = {"step": 1, "algorithm": _RunsCode(str(marker))}
    if legacy:
        path.write_bytes(pickle.dumps(payload))
    else:
        torch.save(payload, path)
    with pytest.raises(CheckpointError, match="evil.pt") as error:
        load_checkpoint(path)
    assert not marker.exists()
    if not legacy:
        assert "could run code" in str(error.value) and "system" in str(error.value)
        torch.load(path, weights_only=False)  # the payload is real: an unsafe load runs it
        assert marker.exists()


def test_required_keys_and_map_location(tmp_path):
    path = tmp_path / "run.pt"
    save_checkpoint(path, {"step": 1, "weights": torch.ones(2)})
    with pytest.raises(CheckpointError, match=r"lacks 'policy' \(it has 'step', 'weights'\)"):
        load_checkpoint(path, required_keys=("step", "policy"))
    with pytest.raises(CheckpointError, match="lacks 'a', 'b'"):
        require_keys({}, ["a", "b"])
    with pytest.raises(ValueError, match="device must be a torch device"):
        load_checkpoint(path, map_location="gpu")
    assert load_checkpoint(path, map_location=None)["weights"].device.type == "cpu"
