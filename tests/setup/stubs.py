"""Stand-ins for the commands docker/*.sh call (docker, apt-get, systemctl, debootstrap, id,
...), first on PATH, each recording its arguments: the scripts' decisions are tested without
an engine, a registry, root or apt. The stand-ins read their behaviour from flag files.

PATH holds only the stubs and /usr/bin:/bin, so the real engine's client (/usr/local/bin),
dockerd and debootstrap (/usr/sbin) are never reached; the commands there that could act as
root (apt-get, systemctl, pgrep, setsid) always have a stand-in.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Each stand-in: a bash body run after its call is logged to $STUB/calls.
BODIES = {
    "docker": """
case "$1 $2" in
  "info "*)
    [[ -e $STUB/denied ]] && { echo "permission denied while trying to connect" >&2; exit 1; }
    [[ -e $STUB/up ]] || { echo "Cannot connect to the Docker daemon" >&2; exit 1; }
    echo 20.10.24 ;;
  "image inspect")
    [[ $3 == -f ]] && { echo 80000000; exit 0; }
    [[ -e "$STUB/have/${3//[:\\/]/_}" ]] ;;
  "pull "*)
    [[ -e $STUB/pull-hangs ]] && sleep 30
    [[ -e $STUB/pullable ]] ;;
  "import "*) cat >/dev/null ;;
esac
""",
    "id": """
case "$1" in -u) echo "${STUB_UID:-1000}" ;; -un) echo newcomer ;; esac
""",
    "systemctl": """
case "$1" in
  is-system-running) [[ -e $STUB/systemd ]] && echo running || { echo offline; exit 1; } ;;
  enable) touch "$STUB/up" ;;
esac
""",
    "dockerd": 'touch "$STUB/up"',
    "setsid": 'exec "$@"',
    "pgrep": "exit 1",
    "apt-get": "",
    "runsc": """
case "$*" in
  flags) platforms='ptrace (default), kvm'
         [[ -e $STUB/systrap ]] && platforms='systrap (default), ptrace, kvm'
         printf '  -platform string\n    \tspecifies which platform to use: %s\n' "$platforms" ;;
  *--platform=kvm*" do "*) [[ -e $STUB/kvm-hangs ]] && exec sleep 30; [[ -e $STUB/kvm-boots ]] ;;
esac
""",
    "debootstrap": 'mkdir -p "$4/etc/ssl/certs" "$4/etc/apt"',
}


@dataclass
class Run:
    """A script's exit code, what it said (stderr), the stand-ins' calls in order, and what
    it printed (stdout)."""

    code: int
    said: str
    calls: list[str]
    printed: str = ""

    def called(self, prefix: str) -> bool:
        return any(call.startswith(prefix) for call in self.calls)


def run_script(
    script: str,
    stub: Path,
    *,
    flags: tuple[str, ...] = (),
    root: bool = False,
    missing: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Run:
    """Run docker/`script` with the stand-ins in `stub`; `flags` set their behaviour (`up`,
    `denied`, `systemd`, `pullable`, `pull-hangs`, `have/<image>`; runsc's: `systrap`,
    `kvm-boots`, `kvm-hangs`), `missing` leaves stand-ins out (a command this machine
    lacks)."""
    bin_dir = stub / "bin"
    (stub / "have").mkdir(parents=True, exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    for name, body in BODIES.items():
        if name in missing:
            continue
        path = bin_dir / name
        path.write_text(f'#!/bin/bash\necho "{name} $*" >>"$STUB/calls"\n{body}\n')
        path.chmod(0o755)
    for flag in flags:
        (stub / flag).touch()
    done = subprocess.run(
        ["bash", str(ROOT / "docker" / script)],
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "STUB": str(stub),
            "STUB_UID": "0" if root else "1000",
            "FLOWERBOX_DOCKERD_WAIT": "2",
            **(env or {}),
        },
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    calls = (stub / "calls").read_text().splitlines() if (stub / "calls").exists() else []
    return Run(done.returncode, done.stderr, calls, done.stdout)
