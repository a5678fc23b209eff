"""The trust boundary on a real engine (issue 15; docs/threat-model.md): each attack of the
review is planted from inside a real box by the scripted model's Bash tool, then the host does
what it did when the attack worked (its own after-run step, the user's next run, resume, stop,
ps, logs, send, the user's own `git status`/`commit`/`log`), and the test asserts that it
failed: no marker file the attack would write on the host appears, no host file outside the
workspace changes, no key reaches a listener of the agent's, and the workspace stays usable.

Markers live in the host's /tmp: the box's /tmp is a tmpfs of its own, so a marker there
means code of the agent's ran on the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from docker import DockerClient  # noqa: TID251 - the tests clean up their containers

from flower.testing import FakeAPI, Reply, Request, When, rules, text, tool
from flowerbox.runs.detach import FRESH_FIELDS
from tests.docker.e2e import FLOWERBOX, REAL, as_user, box_env, home_of, metas, state_of
from tests.listening import stop_listening

pytestmark = pytest.mark.docker

User = tuple[str, int, int]
IDENTITY = "git -c user.name=agent -c user.email=agent@localhost"


@pytest.fixture
def mark() -> Iterator[Path]:
    """A host path the attack's payload would create if it ever ran on the host."""
    path = Path("/tmp") / f"fbx-pwned-{secrets.token_hex(6)}"
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture(autouse=True)
def nothing_left(user_workspace: Path, docker_client: DockerClient) -> Iterator[None]:
    yield
    label = f"dev.flower.box.workspace={user_workspace}"
    for container in docker_client.containers.list(all=True, filters={"label": label}):
        container.remove(force=True)


def plant(api: FakeAPI, ws: Path, script: str, *, then: str = "done") -> None:
    """The model writes `script` to the workspace (Write), runs it once with Bash (the CLI
    asks before a compound command, so the attack is one file), then says `then`."""
    path = ws / f".attack-{secrets.token_hex(3)}.sh"
    steps = iter(
        [
            tool("Write", {"file_path": str(path), "content": script}),
            tool("Bash", {"command": f"bash '{path}'"}),
        ]
    )

    def model(request: Request) -> Reply:
        return next(steps, text(then))

    api.script = rules((When(), model))


def flowerbox(
    user: User, ws: Path, *args: str, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    done = as_user(user, [FLOWERBOX, *args], cwd=ws, env=env)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def users_git(user: User, ws: Path, where: Path | None = None) -> list[int]:
    """The user's own everyday git after a run: status, a commit, log; their exit codes."""
    cwd = where or ws
    commands = [
        ["git", "status", "--short"],
        [
            "git",
            "-c",
            "user.name=me",
            "-c",
            "user.email=me@localhost",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "mine",
        ],
        ["git", "log", "--oneline", "-3"],
    ]
    return [as_user(user, command, cwd=cwd).returncode for command in commands]


# Where an escaped box would aim in the user's home, beside what each test plants.
AIMED_AT = (
    *(".ssh", ".config", ".docker", ".gnupg", ".aws", ".kube", ".claude"),
    *(".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile"),
    *(".zshrc", ".zshenv", ".zprofile"),
)


class Outside:
    """What a box must never touch on the host, hashed before and after an attack.

    The home is the user's suite home (tests/hermetic.py), never its real one. The dedicated
    e2e user's (the runner is root, as in CI) is written by nothing else: all of it is
    hashed, flowerbox's state aside. A developer running the tests as themselves shares
    theirs with the other tests of the same pytest process, so only what a box could aim at
    is hashed there: the test's planted `targets`, AIMED_AT, and the host-only folders of
    the runs that existed before (their records, which a forged one would replace)."""

    def __init__(self, user: User, *targets: Path, whole_home: bool | None = None) -> None:
        home = home_of(user)
        if os.geteuid() == 0 if whole_home is None else whole_home:
            self.roots = [home]
            return
        runs = state_of(user) / "runs"
        earlier = sorted(runs.iterdir()) if runs.is_dir() else []
        self.roots = [*targets, *(home / name for name in AIMED_AT), *earlier]

    def digest(self) -> dict[str, str]:
        """path -> SHA-256 of every regular file under the roots (links not followed)."""
        found = {}
        for root in self.roots:
            for path in sorted([root, *root.rglob("*")] if root.is_dir() else [root]):
                keep = ".local/state" not in str(path.relative_to(root.parent))
                if keep and path.is_file() and not path.is_symlink():
                    found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        return found


@pytest.mark.parametrize("whole_home", [True, False], ids=["e2e-user", "developer"])
def test_the_outside_check_fails_on_a_write_where_a_box_would_aim(
    host_user: User, whole_home: bool
) -> None:
    """The check the attacks end with is no check that cannot fail: a write into ~/.ssh or a
    planted target between the two digests changes it, in either form; a developer's form
    ignores the rest of their home."""
    home = home_of(host_user)
    tag = secrets.token_hex(4)
    planted, elsewhere = home / f"fbx-target-{tag}", home / f"fbx-elsewhere-{tag}"
    escape = home / ".ssh" / f"fbx-escape-{tag}"
    made_ssh = not escape.parent.exists()
    outside = Outside(host_user, planted, whole_home=whole_home)
    before = outside.digest()
    try:
        elsewhere.write_text("another program's file\n")
        assert (outside.digest() == before) != whole_home
        elsewhere.unlink()
        for written in (planted, escape):
            escape.parent.mkdir(exist_ok=True)
            written.write_text("escaped\n")
            assert outside.digest() != before, written
            written.unlink()
            assert outside.digest() == before
    finally:
        for path in (planted, elsewhere, escape):
            path.unlink(missing_ok=True)
        if made_ssh:
            escape.parent.rmdir()


def tool_output(api: FakeAPI) -> str:
    """What the planted script printed (the Write's confirmation left out)."""
    said = (r.text for req in api.requests for r in req.tool_results())
    return "\n".join(t for t in said if not t.startswith("File created successfully"))


# --- git: the box never redirects the user's repository ------------------------------------


@pytest.mark.parametrize(
    "attack",
    [
        pytest.param(
            "mkdir -p evil/hooks && cp -r .git/refs .git/HEAD evil/ && "
            "printf '#!/bin/sh\\ntouch {mark}\\n' > evil/hooks/reference-transaction && "
            "cp evil/hooks/reference-transaction evil/hooks/post-commit && "
            "chmod +x evil/hooks/* && "
            "printf '[core]\\n\\tfsmonitor = touch {mark}\\n' > evil/config && "
            'echo "$PWD/evil" > .git/commondir; '
            "{identity} commit -q --allow-empty -m work; echo planted",
            id="C1-commondir",
        ),
        pytest.param(
            "mv .git .git-away || echo rename refused; rm -rf .git/* 2>/dev/null; git init -q .; "
            "printf '#!/bin/sh\\ntouch {mark}\\n' > .git/hooks/post-commit; "
            "printf '[core]\\n\\tfsmonitor = touch {mark}\\n' >> .git/config; "
            "{identity} commit -q --allow-empty -m work; echo planted",
            id="C1-replaced-git",
        ),
        pytest.param(
            "mkdir -p .claude/worktrees/w && git init -q evilgit && "
            "printf '[core]\\n\\tfsmonitor = touch {mark}\\n' >> evilgit/.git/config && "
            'printf "gitdir: $PWD/evilgit/.git\\n" > .claude/worktrees/w/.git; echo planted',
            id="H3-worktree-gitfile",
        ),
        pytest.param(
            "mkdir -p .git/info && printf '* filter=evil\\n' > .git/info/attributes; "
            "git config filter.evil.clean 'touch {mark}; cat' 2>&1; "
            "mkdir -p .git/objects/info && echo /tmp > .git/objects/info/alternates; "
            "{identity} commit -q --allow-empty -m work; echo planted",
            id="H3-config-and-alternates",
        ),
    ],
)
def test_no_git_metadata_the_box_writes_takes_effect_on_the_host(
    attack: str,
    real_api: FakeAPI,
    host_user: User,
    user_workspace: Path,
    flowerbox_image: str,
    mark: Path,
) -> None:
    outside = Outside(host_user, mark)
    before = outside.digest()
    plant(real_api, user_workspace, attack.format(mark=mark, identity=IDENTITY))
    done = flowerbox(host_user, user_workspace, "once", "work", env=box_env(real_api, host_user))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "planted" in tool_output(real_api)
    assert users_git(host_user, user_workspace) == [0, 0, 0]
    for nested in (user_workspace / ".claude" / "worktrees" / "w", user_workspace / "evilgit"):
        if nested.is_dir():  # the quarantine left git there the top repository's
            assert users_git(host_user, user_workspace, nested)[0] == 0
    assert not mark.exists(), "the agent's code ran on the host"
    git_dir = user_workspace / ".git"
    assert not (git_dir / "commondir").exists() and not (git_dir / "info" / "attributes").exists()
    assert not (git_dir / "objects" / "info" / "alternates").exists()
    assert "fsmonitor" not in (git_dir / "config").read_text()
    assert outside.digest() == before


DELIVERY_ATTACK = """
set -e
start=$(git symbolic-ref --short HEAD)
git checkout -q -b flower/20261201-120000-abc123
echo work > calc.py && git add calc.py && {identity} commit -q -m work
git checkout -q --orphan rewrite && git rm -rqf . && echo other > other.txt && git add other.txt
{identity} commit -q -m rewrite && git branch -f flower/20261201-000000-aaaaaa HEAD
git checkout -q -f "$start"
H=$(git rev-parse flower/20261201-120000-abc123)
for name in "flower/x$(printf '\\033')[2J" flower/-evil flower/20261201-120000-abc125.lock; do
  printf '%s\\n' "$H" > ".git/refs/heads/$name"
done
for hook in reference-transaction post-checkout post-merge post-commit; do
  printf '#!/bin/sh\\ntouch {mark}\\n' > .git/hooks/$hook && chmod +x .git/hooks/$hook
done
mkdir -p runs/worktrees/agent-1 runs/worktrees/agent-2
ln -s {home}/.ssh runs/worktrees/agent-1/.git
git init -q runs/evil && git -C runs/evil config core.fsmonitor 'touch {mark}'
echo "gitdir: $PWD/runs/evil/.git" > runs/worktrees/agent-2/.git
echo planted
"""


def test_a_delivery_the_box_forges_moves_no_branch_of_the_users_and_runs_nothing(
    real_api: FakeAPI,
    host_user: User,
    user_workspace: Path,
    flowerbox_image: str,
    mark: Path,
) -> None:
    """Issue 20, item 3: flower's delivery branch comes back under its own name, so the box
    tries to use that: a flower/ branch that rewrites one of the user's, hostile names,
    hooks in its gitdir, and stopped workers' worktrees whose .git is a link or points at a
    gitdir with an fsmonitor. Only the new branch comes back as itself; nothing runs."""
    git = ["git", "-C", str(user_workspace)]
    mine = "flower/20261201-000000-aaaaaa"
    as_user(host_user, [*git, "branch", mine], cwd=user_workspace)
    outside = Outside(host_user, mark)  # and ~/.ssh, which the attack links to
    before = outside.digest()
    script = DELIVERY_ATTACK.format(mark=mark, identity=IDENTITY, home=home_of(host_user))
    plant(real_api, user_workspace, script)
    done = flowerbox(host_user, user_workspace, "once", "work", env=box_env(real_api, host_user))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "planted" in tool_output(real_api)
    listed = as_user(host_user, [*git, "for-each-ref", "--format=%(refname)"], cwd=user_workspace)
    refs = listed.stdout.split()
    assert "refs/heads/flower/20261201-120000-abc123" in refs  # the box's new branch, as itself
    [run_id] = metas(host_user, user_workspace)
    assert f"refs/heads/flowerbox/{run_id}/{mine}" in refs  # the rewrite: under the prefix
    shown = as_user(host_user, [*git, "log", "--format=%s", mine], cwd=user_workspace).stdout
    assert shown.split() == ["start"]  # the user's branch did not move
    assert not [r for r in refs if "evil" in r or ".lock" in r or "\x1b" in r]
    assert "not brought back" in done.stderr and "\x1b" not in done.stderr
    assert users_git(host_user, user_workspace) == [0, 0, 0]
    for nested in ("agent-1", "agent-2"):
        where = user_workspace / "runs" / "worktrees" / nested
        assert users_git(host_user, user_workspace, where)[0] == 0
    assert not mark.exists(), "the agent's code ran on the host"
    assert outside.digest() == before


def test_a_protected_folder_cannot_be_swapped_by_renaming_its_parent(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    workflows = user_workspace / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "ci.yml").write_text("on: push\n")
    (user_workspace / ".flowerbox").mkdir()
    (user_workspace / ".flowerbox" / "config.toml").write_text('protect = [".github/workflows"]\n')
    for path in (workflows.parent, workflows, workflows / "ci.yml", user_workspace / ".flowerbox"):
        os.chown(path, host_user[1], host_user[2])
    plant(
        real_api,
        user_workspace,
        "mv .github .github-x || echo parent refused; mv .github/workflows .github/w2 || "
        "echo folder refused; mkdir -p .github/workflows; echo evil > .github/workflows/evil.yml;"
        " echo evil >> .github/workflows/ci.yml; echo planted",
    )
    done = flowerbox(host_user, user_workspace, "once", "x", env=box_env(real_api, host_user))
    assert done.returncode == 0, done.stderr[-3000:]
    said = tool_output(real_api)
    assert "parent refused" in said and "folder refused" in said
    assert (workflows / "ci.yml").read_text() == "on: push\n"
    assert sorted(p.name for p in workflows.iterdir()) == ["ci.yml"]
    assert not (user_workspace / ".github-x").exists()


# --- the host never configures itself from, or runs, what the box wrote ---------------------


class Listener:
    """A TCP listener on the host's loopback standing for a server of the agent's: it
    records every connection and what arrived on it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(65536))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        stop_listening(self.sock, self.thread)


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def global_credentials(user: User, root: Path, api: FakeAPI) -> dict[str, str]:
    """The user's key and API in a global .env of their own (XDG_CONFIG_HOME), not in the
    process environment: the case where a workspace .env would win flower's lookup."""
    config = root / "config"
    (config / "flower").mkdir(parents=True)
    (config / "flower" / ".env").write_text(
        f"ANTHROPIC_API_KEY={REAL}\nANTHROPIC_BASE_URL={api.url}\n"
    )
    for path in (config, config / "flower", config / "flower" / ".env"):
        os.chown(path, user[1], user[2])
    env = box_env(api, user)
    del env["ANTHROPIC_API_KEY"], env["ANTHROPIC_BASE_URL"]
    return {**env, "XDG_CONFIG_HOME": str(config)}


def test_a_dotenv_the_box_writes_never_redirects_the_key_nor_runs_code_on_the_host(
    real_api: FakeAPI,
    host_user: User,
    user_workspace: Path,
    flowerbox_image: str,
    listener: Listener,
    mark: Path,
) -> None:
    env = global_credentials(host_user, user_workspace.parent, real_api)
    plant(
        real_api,
        user_workspace,
        f"mkdir -p evil && printf 'import pathlib\\npathlib.Path(\"{mark}\").touch()\\n' > "
        f"evil/sitecustomize.py && printf 'ANTHROPIC_BASE_URL=http://127.0.0.1:{listener.port}\\n"
        'PYTHONPATH=%s/evil\\n\' "$PWD" > .env; echo planted',
    )
    first = flowerbox(host_user, user_workspace, "once", "plant", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "the run created .env" in first.stderr and f"127.0.0.1:{listener.port}" in first.stderr
    asked = len(real_api.requests)
    plant(real_api, user_workspace, "echo second run")
    second = flowerbox(host_user, user_workspace, "once", "again", "--detach", env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    run_id = second.stdout.strip()
    deadline = time.monotonic() + 240
    while metas(host_user, user_workspace)[run_id]["status"] in ("starting", "running"):
        assert time.monotonic() < deadline, "the detached run never ended"
        time.sleep(0.5)
    assert metas(host_user, user_workspace)[run_id]["exit_code"] == 0
    assert len(real_api.requests) > asked  # the key went where the user said, only there
    assert listener.received == [], "a request reached the agent's server"
    assert not mark.exists(), "the supervisor ran the agent's sitecustomize"


def test_a_workspace_dotenv_is_hidden_from_the_box(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    canary = "sk-ant-canary-" + secrets.token_hex(8)
    (user_workspace / ".env").write_text(f"ANTHROPIC_API_KEY={canary}\n")
    os.chown(user_workspace / ".env", host_user[1], host_user[2])
    plant(real_api, user_workspace, "wc -c < .env; cat .env; echo; echo read")
    done = flowerbox(host_user, user_workspace, "once", "x", env=box_env(real_api, host_user))
    assert done.returncode == 0, done.stderr[-3000:]
    said = tool_output(real_api)
    assert "read" in said and canary not in said and said.split()[0] == "0"
    assert ".env 对盒子隐藏" in done.stderr  # zh, as the e2e runs speak
    assert (user_workspace / ".env").read_text() == f"ANTHROPIC_API_KEY={canary}\n"
    again = flowerbox(host_user, user_workspace, "once", "y", env=box_env(real_api, host_user))
    assert ".env 对盒子隐藏" not in again.stderr  # told once


# --- flowerbox's records are its own: the box cannot forge, redirect or pin them -----------


FORGED_META = (
    'id=$(ls runs/events | sed "s/.jsonl$//" | head -1); mkdir -p runs/flowerbox/$id && '
    'printf \'{{"run_id": "%s", "status": "stopped", "spec": {{"home": "{home}",'
    ' "protected": [], "limits": {{"pids": 99999, "memory": "64g", "cpus": 64}},'
    ' "command": ["sh", "-c", "touch {mark}"]}}}}\' $id > runs/flowerbox/$id/meta.json; '
    "ls -a $HOME/.local/state 2>&1 | head -2; echo planted"
)


def test_resume_after_tampering_builds_exactly_the_original_box(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str, mark: Path
) -> None:
    env = box_env(real_api, host_user)
    plant(real_api, user_workspace, FORGED_META.format(home=home_of(host_user), mark=mark))
    first = flowerbox(host_user, user_workspace, "once", "x", "--budget", "5", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    [original] = metas(host_user, user_workspace).values()
    plant(real_api, user_workspace, "echo resumed")
    resumed = flowerbox(host_user, user_workspace, "resume", original["run_id"], env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    [new] = [m for m in metas(host_user, user_workspace).values() if m["resumed_from"]]
    for name, value in original["spec"].items():
        if name not in FRESH_FIELDS and name != "budget_usd":
            assert new["spec"][name] == value, name
    assert new["spec"]["budget_usd"] < 5  # what was left of the budget, from the host's ledger
    assert not mark.exists()


def test_a_planted_lost_run_neither_blocks_the_workspace_nor_steers_stop(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    precious = home_of(host_user) / "precious"
    precious.mkdir(exist_ok=True)
    (precious / "keep.txt").write_text("keep\n")
    fake = "20250101-000000-abcdef"
    plant(
        real_api,
        user_workspace,
        f'mkdir -p runs/flowerbox/{fake} runs/flowerbox/junk && printf \'{{"run_id": "{fake}",'
        f' "status": "running", "keeper_pid": 1, "host": "\'$(hostname)\'", "started": "x",'
        f' "workspace": "\'$PWD\'", "spec": {{"socket_dir": "{precious}",'
        f' "secrets_dir": "{precious}"}}}}\' > runs/flowerbox/{fake}/meta.json; '
        "printf 'not json' > runs/flowerbox/junk/meta.json; echo planted",
    )
    env = box_env(real_api, host_user)
    first = flowerbox(host_user, user_workspace, "once", "x", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    plant(real_api, user_workspace, "echo again")
    second = flowerbox(host_user, user_workspace, "once", "y", env=env)
    assert second.returncode == 0 and fake not in second.stderr, second.stderr[-3000:]
    stop = flowerbox(host_user, user_workspace, "stop", fake, env=env)
    assert stop.returncode == 2 and repr(fake) in stop.stderr  # named, in either language
    listed = flowerbox(host_user, user_workspace, "ps", "--json", env=env)
    assert listed.returncode == 0 and fake not in listed.stdout
    assert (precious / "keep.txt").read_text() == "keep\n"


SLOW = "python3 -c 'import time; time.sleep(90)'"


def wait_for(check: Callable[[], bool], what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.3)


def test_links_fifos_and_junk_in_runs_never_redirect_or_hang_the_host(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """H2, M2, M7, L3: the lock, the usage file, asks.json, the events file and the inbox
    replaced by links to a user file, FIFOs and /dev/zero while a detached run is live."""
    home = home_of(host_user)
    (home / "precious.txt").write_text("keep\n")
    (home / "outside").mkdir(exist_ok=True)
    outside = Outside(host_user, home / "precious.txt", home / "outside")
    before = outside.digest()
    attack = (
        f"mkdir -p runs/flowerbox/x && ln -sf {home}/precious.txt runs/flowerbox/x/meta.json.lock;"
        " ln -sf runs/flowerbox runs/flowerbox-link; mkfifo runs/gateway-usage.json; "
        "rm -f runs/asks.json; ln -s /dev/zero runs/asks.json; "
        f"rm -rf runs/inbox; ln -s {home}/outside runs/inbox; "
        "for f in runs/events/*.jsonl; do rm -f $f; mkfifo $f; done; echo planted; " + SLOW
    )
    plant(real_api, user_workspace, attack)
    env = box_env(real_api, host_user)
    started = flowerbox(host_user, user_workspace, "once", "x", "--detach", env=env)
    assert started.returncode == 0, started.stderr[-3000:]
    run_id = started.stdout.strip()
    wait_for(lambda: (user_workspace / "runs" / "inbox").is_symlink(), "the links planted")
    wait_for(
        lambda: (
            (user_workspace / "runs" / "events").is_dir()
            and any(p.is_fifo() for p in (user_workspace / "runs" / "events").iterdir())
        ),
        "the FIFO planted",
    )
    for command in (["ps", "--json"], ["logs", run_id]):  # each returns, none hangs
        done = flowerbox(host_user, user_workspace, *command, env=env)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    sent = flowerbox(host_user, user_workspace, "send", "hello", "-r", run_id, env=env)
    assert sent.returncode == 2 and "无法投递给运行" in sent.stderr
    stopped = flowerbox(host_user, user_workspace, "stop", run_id, env=env)
    assert stopped.returncode == 0, stopped.stderr[-2000:]
    assert metas(host_user, user_workspace)[run_id]["status"] not in ("starting", "running")
    assert (home / "precious.txt").read_text() == "keep\n"
    assert list((home / "outside").iterdir()) == []
    assert outside.digest() == before


def test_the_audit_trail_is_the_hosts_the_box_cannot_forge_it(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """M3: a zeroed cost, a forged note, a bogus worktree HEAD, a truncated egress log."""
    plant(
        real_api,
        user_workspace,
        'echo \'{"total_cost_usd": 0, "requests": 0}\' > runs/gateway-usage.json; '
        f"{IDENTITY} notes --ref refs/notes/flowerbox add -f -m 'forged: yes' HEAD; "
        f"{IDENTITY} commit -q --allow-empty -m agent-commit && git rev-parse HEAD; "
        "mkdir -p .git/worktrees/x && echo garbage > .git/worktrees/x/HEAD; "
        "find / -name egress.jsonl 2>/dev/null | head -3; echo planted",
    )
    start = as_user(host_user, ["git", "rev-parse", "HEAD"], cwd=user_workspace).stdout.strip()
    done = flowerbox(host_user, user_workspace, "once", "x", env=box_env(real_api, host_user))
    assert done.returncode == 0, done.stderr[-3000:]
    said = tool_output(real_api)
    assert "egress.jsonl" not in said.replace("planted", "")  # not reachable from the box
    made = [line for line in said.split() if len(line) == 40][-1]
    [meta] = metas(host_user, user_workspace).values()
    ledger = state_of(host_user) / "runs" / meta["run_id"] / "gateway" / "usage.json"
    usage = json.loads(ledger.read_text())
    assert meta["cost_usd"] == usage["total_cost_usd"] > 0
    head = as_user(host_user, ["git", "rev-parse", "HEAD"], cwd=user_workspace).stdout.strip()
    assert head == made  # the agent's commit came back: main fast-forwarded
    note = ["git", "notes", "--ref", "refs/notes/flowerbox", "show"]
    assert (
        f"flowerbox-run: {meta['run_id']}"
        in as_user(host_user, [*note, made], cwd=user_workspace).stdout
    )
    assert as_user(host_user, [*note, start], cwd=user_workspace).returncode != 0  # no forgery
    assert not (user_workspace / ".git" / "worktrees" / "x").exists()


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("/etc", "系统文件夹"),  # the tests' language (zh)
        ("/tmp", "系统文件夹"),
        ("HOME", "它就是、包含或位于"),
        ("HOLDS-HOME", "它就是、包含或位于"),
        ("COLON", "Docker 无法挂载"),
    ],
)
def test_workspaces_a_box_must_never_get_are_refused_before_anything_starts(
    where: str, says: str, real_api: FakeAPI, host_user: User, user_workspace: Path
) -> None:
    """M5, L5: the home, a folder holding it, system folders, a name Docker cannot mount."""
    env = box_env(real_api, host_user)
    if where == "HOME":
        where = env["HOME"]
    elif where == "HOLDS-HOME":
        env["HOME"] = str(user_workspace / "home")  # the workspace would hold ~/.config
        (user_workspace / "home").mkdir()
        os.chown(user_workspace / "home", host_user[1], host_user[2])
        where = str(user_workspace)
    elif where == "COLON":
        (user_workspace / "a:b").mkdir()
        where = str(user_workspace / "a:b")
    done = flowerbox(host_user, user_workspace, "once", "x", "-w", where, env=env)
    assert done.returncode == 2 and says in done.stderr, done.stderr[-2000:]
    assert not list((state_of(host_user) / "secrets").glob("*"))
    assert real_api.requests == []


def test_a_broken_protect_list_the_box_wrote_is_reported_and_costs_no_key_on_disk(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """M6: `.flowerbox/config.toml` created by the box (it did not exist at the start)."""
    script = "mkdir -p .flowerbox && printf 'protect = [\\n' > .flowerbox/config.toml; echo x"
    plant(real_api, user_workspace, script)
    env = box_env(real_api, host_user)
    first = flowerbox(host_user, user_workspace, "once", "x", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "the run created .flowerbox/config.toml" in first.stderr
    for _ in range(2):
        refused = flowerbox(host_user, user_workspace, "once", "y", env=env)
        assert refused.returncode == 2 and ".flowerbox/config.toml" in refused.stderr
        assert "请修好它或删除它" in refused.stderr
    assert not list((state_of(host_user) / "secrets").glob("*"))  # no key left on disk
    (user_workspace / ".flowerbox" / "config.toml").unlink()  # the user's fix
    plant(real_api, user_workspace, "echo fine")
    assert flowerbox(host_user, user_workspace, "once", "z", env=env).returncode == 0


def test_what_the_box_prints_reaches_the_terminal_without_control_sequences(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """L1: escape sequences in the events file, the model's text and the tool output."""
    esc = "\\033]0;pwned\\007\\033[2J\\033]8;;http://evil.example/\\033\\\\link\\033]8;;\\033\\\\"
    plant(
        real_api,
        user_workspace,
        f"printf '{esc}\\n'; for f in runs/events/*.jsonl; do printf "
        f'\'{{"kind": "text", "text": "{esc}"}}\\n\' >> $f; done; echo planted',
        then="all done \x1b]0;title\x07 \x1b[31mred\x1b[0m",
    )
    env = box_env(real_api, host_user)
    done = flowerbox(host_user, user_workspace, "once", "x", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    [run_id] = metas(host_user, user_workspace)
    shown = flowerbox(host_user, user_workspace, "logs", run_id, env=env)
    assert shown.returncode == 0 and "all done" in shown.stdout
    for output in (shown.stdout, shown.stderr, done.stdout, done.stderr):
        assert "\x1b" not in output and "\x07" not in output


def test_a_run_past_its_disk_budget_is_stopped_cleanly_and_can_resume(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """A bind mount has no quota: the keeper watches the box's folders grow."""
    plant(real_api, user_workspace, "head -c 150000000 /dev/zero > big.bin; echo written; " + SLOW)
    env = box_env(real_api, host_user)
    done = flowerbox(host_user, user_workspace, "once", "x", "--disk-budget", "0.05", env=env)
    # SIGTERM, as `flowerbox stop`: `go` records its step (130); `once` dies of it (143)
    assert done.returncode in (130, 143), done.stderr[-3000:]
    assert done.stderr.count("past its disk budget of 0.05 GB") == 1
    [meta] = metas(host_user, user_workspace).values()
    assert meta["exit_code"] == done.returncode and "disk budget" in meta["stop_reason"]
    (user_workspace / "big.bin").unlink()


def test_a_link_planted_where_the_next_box_mounts_something_refuses_that_start(
    real_api: FakeAPI, host_user: User, user_workspace: Path, flowerbox_image: str
) -> None:
    """Beyond the review: Docker follows links in a mount's source, so a protected path the
    box created as a link (`Dockerfile`, `.flowerbox`: mounted read-only when they exist)
    would hand the next box the host folder it names. The next start is refused instead.
    (runs/ and runs/home are mount points inside: the box cannot replace them.)"""
    home = home_of(host_user)
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_test").write_text("PRIVATE KEY\n")
    for name in ("Dockerfile", ".flowerbox"):
        plant(real_api, user_workspace, f"ln -s {home}/.ssh {name}; rm -rf runs/home; echo planted")
        env = box_env(real_api, host_user)
        first = flowerbox(host_user, user_workspace, "once", "x", env=env)
        assert first.returncode == 0, first.stderr[-3000:]
        assert (user_workspace / name).is_symlink() and (user_workspace / "runs" / "home").is_dir()
        asked = len(real_api.requests)
        refused = flowerbox(host_user, user_workspace, "once", "y", env=env)
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert str(user_workspace / name) in refused.stderr and "是链接" in refused.stderr  # zh
        assert len(real_api.requests) == asked  # no box started
        (user_workspace / name).unlink()  # the user's fix
    assert (home / ".ssh" / "id_test").read_text() == "PRIVATE KEY\n"
