"""The names the host, the gateway's container and the agent's container agree on.

Each side is built from the same image but runs apart, so a name spelled twice can drift
apart silently: a socket the relay never finds, a label `ps` never matches. Every name that
crosses a process or container boundary is spelled here once (testcontainers'
`core/labels.py` is the model). Pure constants: the agent's container imports this module
too, so it holds nothing but the standard library's types.
"""

from __future__ import annotations

# --- which flowerbox an image was built for: another is stale (box.engine.ensure_image) ------
VERSION_LABEL = "org.opencontainers.image.version"  # = flowerbox.__version__ at build time
VERSION_BUILD_ARG = "FLOWERBOX_VERSION"
# Which build made an image, and for which uid: a build removes its own leftovers by its id
# alone, never another build's (docker/prepare.sh, box.engine.ensure_image).
BUILD_ID_LABEL = "dev.flower.build.id"
BUILD_ID_ARG = "FLOWERBOX_BUILD_ID"
BUILD_USER_ARG = "FLOWERBOX_BUILD_USER"

# --- containers: labels, so flowerbox finds what it owns ------------------------------------
BOX_LABEL = "dev.flower.box"
RUN_LABEL = f"{BOX_LABEL}.run"
WORKSPACE_LABEL = f"{BOX_LABEL}.workspace"
ROLE_LABEL = f"{BOX_LABEL}.role"  # "agent" or "gateway"
SURVIVOR_LABEL = "dev.flower.selftest.survivor"  # a container a self-test probe tried to start

# --- the agent's side of the relay: loopback ports inside its container -------------------
API_PORT = 8080
PROXY_PORT = 3128  # the egress proxy (docs/egress.md)
GIT_PORT = 8081  # a cluster broker's git relay: it adds the git credential only it holds
METRICS_PORT = 9180  # a cluster broker's Prometheus metrics (flowerbox.broker.metrics)
PLACEHOLDER_KEY = "sk-flowerbox-placeholder"  # the agent's API key: worth nothing

# --- folders mounted into the containers, and the files in them ---------------------------
SOCKET_DIR_IN_BOX = "/run/flowerbox"  # both containers: the gateway's unix sockets
API_SOCKET = "api.sock"
PROXY_SOCKET = "proxy.sock"
SECRETS_IN_GATEWAY = "/run/flowerbox-secrets"  # the gateway's alone, read-only
CREDENTIALS_FILE = "credentials.env"
# A broker's run: the run's token, in the run's secrets folder, mounted read-only into the
# agent alone; the entry puts it in the command's environment (never the container's).
TOKEN_FILE = "run-token"
TOKEN_IN_BOX = "/run/flowerbox-token"
OBJECTS_IN_BOX = "/run/flowerbox-git/objects"  # the user's git objects, read-only
USAGE_FILE = "usage.json"  # the gateway's ledger, in the run's host-only gateway folder
EGRESS_LOG = "egress.jsonl"  # one JSON line per egress decision, next to it
REQUESTS_LOG = "requests.jsonl"  # one JSON line per API request the gateway answered, too
LEASE_SOCKET = "lease.sock"  # next to them: whoever keeps the box holds it (sidecar.lease)

# --- a run on Kubernetes: labels, and its token Secret (the client writes, the broker reads) --
KUBE_RUN_LABEL = "flowerbox.dev/run-id"  # a label key may have one '/': the dotted names can't
KUBE_ROLE_LABEL = "flowerbox.dev/role"  # agent, broker, selftest, token
TOKEN_KEY = "token"  # the run's broker token in its Secret (made by the client, never rendered)
TOKEN_ROLE = "token"  # the KUBE_ROLE_LABEL of a run's token Secret: what the broker watches
TOKEN_SECRET = "flowerbox-{run_id}-token"  # its name: the broker serves it while a Job reads it
BUDGET_ANNOTATION = "flowerbox.dev/budget-usd"  # on the token Secret: the run's budget
ALLOW_ANNOTATION = "flowerbox.dev/allow"  # on the token Secret: its egress allowlist, JSON
API_FETCH_ANNOTATION = "flowerbox.dev/allow-api-fetch"  # "true": its --allow-api-fetch
# On the token Secret too (and on the run's claim): the one repository the broker's git relay
# lets the run reach, and the image its provenance note names.
REPO_ANNOTATION = "flowerbox.dev/repo"
IMAGE_ANNOTATION = "flowerbox.dev/image"
# The one ref a cluster run may push, its delivery (on the token Secret and the claim): outside
# refs/heads/ unless the run was made with --deliver-branch, so a forge's CI, which runs on
# branch and tag pushes, never runs the agent's code with the repository's secrets unasked.
DELIVER_ANNOTATION = "flowerbox.dev/deliver-ref"
DELIVERY_REF = "refs/flowerbox/{run_id}"
DELIVERY_BRANCH = "refs/heads/flowerbox/{run_id}"

# --- entry modules: what each container (or the host's keeper) runs with `python -m` -------
GATEWAY_MODULE = "flowerbox.sidecar.gateway"
INSIDE_MODULE = "flowerbox.inside.entry"
RELAY_MODULE = "flowerbox.inside.relay"
PROBES_MODULE = "flowerbox.selftest.probes"
SUPERVISOR_MODULE = "flowerbox.runs.supervise"
GUARD_MODULE = "flowerbox.runs.guard"
