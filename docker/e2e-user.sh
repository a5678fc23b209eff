#!/usr/bin/env bash
# Prepare what the appliance's end-to-end tests run as: an unprivileged host user in the
# docker group (DESIGN.md: users and CI runners are not root), and a flowerbox install it can
# execute (a developer's venv often sits under a home it cannot enter). Idempotent.
#   FLOWERBOX_E2E_USER  (default flowerbox-e2e)   FLOWERBOX_E2E_VENV (default /opt/flowerbox-e2e)
set -euo pipefail

user=${FLOWERBOX_E2E_USER:-flowerbox-e2e}
venv=${FLOWERBOX_E2E_VENV:-/opt/flowerbox-e2e}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

[[ $(id -u) == 0 ]] || { echo "e2e-user.sh: needs root (to add a user)" >&2; exit 1; }
getent group docker >/dev/null || { echo "e2e-user.sh: no docker group: run docker/engine.sh first" >&2; exit 1; }
id "$user" >/dev/null 2>&1 || useradd --create-home --groups docker "$user"
usermod --append --groups docker "$user"

# The system interpreter: world-executable, unlike a pyenv under /root.
[[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# With the otel extra: the host exports a run's trace (tests/docker/test_traces.py).
"$venv/bin/python" -m pip install -q "${here}[otel]"
chmod -R a+rX "$venv"
echo "e2e-user.sh: $user ready; flowerbox at $venv/bin/flowerbox" >&2
