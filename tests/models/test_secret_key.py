"""The generated secret key: one complete key, however many processes start at once."""

import multiprocessing
from pathlib import Path

import pytest

from models.core.settings import Settings, resolve_secret_key


def test_a_key_file_written_by_processes_starting_together_is_one_complete_key(tmp_path):
    """Four processes race to create the key, many times: all read the same whole key."""
    context = multiprocessing.get_context("fork")
    for round_number in range(25):
        data_dir = tmp_path / f"round-{round_number}"
        barrier = context.Barrier(4)
        results = context.Queue()
        racers = [
            context.Process(target=_race_for_the_key, args=(data_dir, barrier, results))
            for _ in range(4)
        ]
        for racer in racers:
            racer.start()
        keys = {results.get(timeout=30) for _ in racers}
        for racer in racers:
            racer.join(timeout=30)

        assert len(keys) == 1
        (key,) = keys
        assert len(key) == 64
        assert (data_dir / "secret_key").read_bytes().strip() == key
        assert [path.name for path in data_dir.iterdir()] == ["secret_key"]  # no leftovers


def _race_for_the_key(data_dir: Path, barrier: object, results: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    key = resolve_secret_key(Settings(data_dir=data_dir, secret_key=""))
    results.put(key)  # type: ignore[attr-defined]


def test_a_configured_key_shorter_than_32_bytes_is_refused():
    with pytest.raises(ValueError, match="must be at least 32 bytes"):
        Settings(secret_key="x" * 31)
