"""Anti-persistence on a real engine, as the e2e user: inside the box, `.git/hooks`,
`.git/config`, Dockerfile, compose.yaml, `.flowerbox` and a path the workspace's own
`.flowerbox/config.toml` adds refuse every write, rename and removal, and the host's files are
unchanged afterwards; an unprotected file in the same workspace is writable (the control)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from flower.testing import FakeAPI
from tests.docker.e2e import FLOWERBOX, as_user, box_env

pytestmark = pytest.mark.docker

FILES = {
    "Dockerfile": "FROM scratch\n",
    "compose.yaml": "services: {}\n",
    "deploy.sh": "echo deploying\n",  # protected only by the workspace's config
    ".flowerbox/config.toml": 'protect = ["deploy.sh"]\n',
    "README.md": "not protected\n",
}
PROTECTED = [".git/config", "Dockerfile", "compose.yaml", "deploy.sh", ".flowerbox/config.toml"]
ATTEMPTS = """
for f in .git/config Dockerfile compose.yaml deploy.sh .flowerbox/config.toml README.md; do
  (echo planted >> "$f") 2>/dev/null && echo "WROTE $f" || echo "REFUSED $f"
done
for f in Dockerfile deploy.sh; do
  mv "$f" "$f.moved" 2>/dev/null && echo "MOVED $f" || echo "KEPT $f"
  rm -f "$f" 2>/dev/null; test -e "$f" && echo "STAYED $f" || echo "REMOVED $f"
done
try() { label=$1; shift; ("$@") 2>/dev/null && echo "WROTE $label" || echo "REFUSED $label"; }
try hook sh -c "echo 'echo pwned' > .git/hooks/post-checkout"
try .flowerbox/new.toml sh -c "echo x > .flowerbox/new.toml"
try git-config git config core.hooksPath /tmp/evil
"""


def test_protected_paths_refuse_writes_inside_and_the_host_files_stay_as_they_were(
    real_api: FakeAPI, host_user: tuple[str, int, int], user_workspace: Path, flowerbox_image: str
) -> None:
    setup = "; ".join(
        f"mkdir -p {shlex.quote(str(Path(name).parent))} && printf %s {shlex.quote(text)} > {name}"
        for name, text in FILES.items()
    )
    assert as_user(host_user, ["sh", "-c", setup], cwd=user_workspace).returncode == 0
    before = {name: (user_workspace / name).read_bytes() for name in [*PROTECTED, "README.md"]}
    hooks_before = sorted(p.name for p in (user_workspace / ".git" / "hooks").iterdir())

    done = as_user(
        host_user,
        [FLOWERBOX, "shell", "--", "sh", "-c", ATTEMPTS],
        cwd=user_workspace,
        env=box_env(real_api, host_user),
    )

    assert done.returncode == 0, done.stderr[-3000:]
    seen = set(done.stdout.split("\n"))
    for name in PROTECTED:
        assert f"REFUSED {name}" in seen, done.stdout
    for name in ("Dockerfile", "deploy.sh"):
        assert {f"KEPT {name}", f"STAYED {name}"} <= seen, done.stdout
    assert {"REFUSED hook", "REFUSED .flowerbox/new.toml", "REFUSED git-config"} <= seen
    assert "WROTE README.md" in seen  # the control: the workspace itself is writable
    for name in PROTECTED:
        assert (user_workspace / name).read_bytes() == before[name], name
    assert (user_workspace / "README.md").read_text() == "not protected\nplanted\n"
    assert sorted(p.name for p in (user_workspace / ".git" / "hooks").iterdir()) == hooks_before
    assert not (user_workspace / ".flowerbox" / "new.toml").exists()
    assert not list(user_workspace.glob("*.moved"))
