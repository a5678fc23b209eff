"""The engine's API as a detached run's keeper speaks it (flowerbox.box.engineapi): what it
says when it cannot (the calls themselves run against the engine in tests/docker/test_detach.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowerbox.box.engineapi import EngineAPI, EngineError


def test_an_engine_the_keeper_cannot_speak_to_is_refused_saying_which_it_can() -> None:
    with pytest.raises(EngineError) as refused:
        EngineAPI("ssh://someone@somewhere")
    assert "DOCKER_HOST=ssh://someone@somewhere" in str(refused.value)
    assert "at unix:// or tcp://" in str(refused.value)


def test_no_engine_at_the_socket_is_a_clear_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWER_LANG", "en")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    api = EngineAPI.from_env()
    with pytest.raises(EngineError) as failed:
        api.json("GET", "/containers/flowerbox-x/json")
    assert "cannot reach a Docker engine" in str(failed.value)
    assert "DOCKER_HOST" in str(failed.value)
