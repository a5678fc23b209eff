"""docker/daemon-runtime.py, the daemon.json merge of docker/gvisor.sh, run as gvisor.sh runs
it: the user's keys kept, their file backed up once and never overwritten by a second
registration, a file that is no JSON object left as it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "docker" / "daemon-runtime.py"


def register(config: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(config), "runsc", "/usr/bin/runsc", json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_second_registration_keeps_the_users_original_backup(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    users = '{"log-level": "warn", "runtimes": {"other": {"path": "/bin/other"}}}\n'
    config.write_text(users)
    assert register(config, ["--platform=ptrace"]).returncode == 0
    assert register(config, ["--platform=systrap"]).returncode == 0
    merged = json.loads(config.read_text())
    assert merged["log-level"] == "warn"
    assert merged["runtimes"]["other"] == {"path": "/bin/other"}
    assert merged["runtimes"]["runsc"]["runtimeArgs"] == ["--platform=systrap"]
    assert (tmp_path / "daemon.json.flowerbox-bak").read_text() == users


def test_no_file_gets_one_and_no_backup(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    assert register(config, []).returncode == 0
    assert json.loads(config.read_text()) == {
        "runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": []}}
    }
    assert not (tmp_path / "daemon.json.flowerbox-bak").exists()


def test_a_file_that_is_not_a_json_object_is_left_as_it_is(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    for text in ("{not json", '["a list"]', '{"runtimes": []}'):
        config.write_text(text)
        done = register(config, [])
        assert done.returncode == 1, done.stderr
        assert "it was left as it is" in done.stderr
        assert config.read_text() == text
    assert not (tmp_path / "daemon.json.flowerbox-bak").exists()
