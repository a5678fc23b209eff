"""Every error flowerbox raises on purpose, in one tree; the CLI turns the base into exit 2.

    FlowerboxError                  what a user can get wrong or fix; the message says how
    ├── ConfigError                 a workspace, option or config flowerbox refuses
    │   ├── CredentialsError        no credentials where flowerbox may take them from
    │   ├── EgressError             an --allow entry or preset that cannot be used
    │   └── PriceError              a prices file that cannot be used (`path`)
    ├── BoxError                    the Docker side: no engine, no image, a container failed
    ├── ClusterError                the Kubernetes side: no kubeconfig, an API refusal (`status`)
    ├── RunError                    no such run, or not in a state for what was asked (`run_id`)
    ├── StateError                  flowerbox's host-only state cannot be made or used (`path`)
    ├── GitShadowError              the box's git directory cannot be made or brought back (`path`)
    ├── ProvenanceError             git refused to write a provenance note
    ├── HostGitError                git on the host could not run, timed out, or met config
                                    of the workspace's it cannot neutralize
    ├── GatewayError                the gateway cannot start (in the gateway's container)
    ├── BadRequest                  a request the gateway or proxy will not read (`status`)
    └── UntrustedFileError          a box-written path the host refuses to follow (`path`);
                                    also an OSError, as every failed file access is

flower's own refusals (`flower.FlowerError`: a bad .env, a corrupt state file), met through
flower's functions, are mapped the same way. Anything else that escapes (a ValueError, a
KeyError) is a bug: the CLI lets it through with its traceback instead of dressing it as exit
2 (httpx's `_exceptions.py` is the model). The standard library's own errors (OSError from a
failed write, say) are caught where they happen and re-raised as one of these, with the path.
"""

from __future__ import annotations

from pathlib import Path

from flower import text


class FlowerboxError(Exception):
    """The base of every error flowerbox raises on purpose. `fix`, where a class or an
    instance sets it, is what to do alone, for `--json` documents (else it is read from the
    message's last clause)."""

    fix: str | None = None


class ConfigError(FlowerboxError):
    """A workspace, an option or a config flowerbox refuses; the message says what to pass."""


class CredentialsError(ConfigError):
    """No credentials where flowerbox may take them from; the message says where they go."""


class EgressError(ConfigError):
    """An --allow entry or preset that cannot be used; the message says what to pass."""


class PriceError(ConfigError):
    """A prices file cannot be used; the message names the file and the bad entry."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class BoxError(FlowerboxError):
    """Something on the Docker side failed; the message names it and the fix."""


class ClusterError(FlowerboxError):
    """The cluster refused or cannot be reached; `status` is the API's HTTP status, if any."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RunError(FlowerboxError):
    """No such run, or not in a state for what was asked; the message says what to do."""

    def __init__(self, message: str, *, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


class StateError(FlowerboxError):
    """flowerbox's state folder cannot be made or used; the message says what to do."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class GitShadowError(FlowerboxError):
    """The workspace's git cannot be shadowed or brought back; `path` is what was refused."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class ProvenanceError(FlowerboxError):
    """git refused to write a note; the message has git's words."""


class HostGitError(FlowerboxError):
    """git on the host could not run, ran past its time, or the workspace's config holds
    what flowerbox cannot neutralize; the message says which and what to do."""


class GatewayError(FlowerboxError):
    """The gateway cannot start; the message says which file and what to fix."""


class BrokerError(FlowerboxError):
    """The broker cannot start or answer (its folder, ledger, credentials or control socket);
    the message says what to fix."""


class BadRequest(FlowerboxError):
    """The request cannot be read; `status` is what to answer (400, 413 or 431)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class UntrustedFileError(FlowerboxError, OSError):
    """A path under a box-writable root is not what the host may read or write there."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(text("untrusted.refused", path=path, what=what))
        self.path = path
