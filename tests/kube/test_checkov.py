"""A third-party policy checker's verdict on every rendered manifest: checkov's Kubernetes
checks (Pod security, NetworkPolicy, resources, the service-account token, ...) pass, and
every skip is one of flowerbox.kube.render.SKIPS, whose reasons docs/deployment.md gives.

checkov pins many packages of its own, so it lives in a virtualenv of its own that `make
test` builds (.venv-checkov); FLOWERBOX_CHECKOV may name another checkov executable.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from flowerbox.kube.document import dump
from flowerbox.kube.pod import Manifest
from flowerbox.kube.render import SKIPS

REPO = Path(__file__).resolve().parents[2]
CHECKOV = Path(os.environ.get("FLOWERBOX_CHECKOV", REPO / ".venv-checkov" / "bin" / "checkov"))


def checkov(folder: Path) -> dict[str, Any]:
    if not CHECKOV.exists():
        why = f"checkov is not installed at {CHECKOV}: `make .venv-checkov/.installed`"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    done = subprocess.run(
        [str(CHECKOV), "-d", str(folder), "--framework", "kubernetes", "--output", "json"]
        + ["--skip-download"],  # nothing from the vendor's platform: the checks are local
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    report = json.loads(done.stdout)
    return report[0] if isinstance(report, list) else report


def weakened(manifests: list[Manifest]) -> Manifest:
    """The agent's Job with root allowed and privilege escalation on: checkov must see it."""
    job = copy.deepcopy(next(m for m in manifests if m["kind"] == "Job"))
    job["metadata"]["name"] = "flowerbox-weak"
    job["metadata"].pop("annotations")
    pod = job["spec"]["template"]["spec"]
    pod["securityContext"] = {}
    pod["automountServiceAccountToken"] = True
    for box in (*pod["initContainers"], *pod["containers"]):
        box["securityContext"] = {"allowPrivilegeEscalation": True, "runAsNonRoot": False}
    return job


def test_checkov_passes_every_manifest_with_only_documented_skips(
    manifests: list[Manifest], tmp_path: Path
) -> None:
    (tmp_path / "run.yaml").write_text(dump(manifests))
    (tmp_path / "weak.yaml").write_text(dump([weakened(manifests)]))
    results = checkov(tmp_path)["results"]

    def of(kind: str, *, weak: bool) -> list[dict[str, Any]]:
        return [c for c in results[kind] if c["resource"].endswith(".flowerbox-weak") is weak]

    assert [(c["check_id"], c["resource"]) for c in of("failed_checks", weak=False)] == []
    assert len(of("passed_checks", weak=False)) > 100
    for check in of("skipped_checks", weak=False):
        assert check["check_result"]["suppress_comment"] == SKIPS[check["check_id"]]
    failed = {c["check_id"] for c in of("failed_checks", weak=True)}
    # The check can fail: root, escalation and an API token are each caught.
    assert {"CKV_K8S_20", "CKV_K8S_23", "CKV_K8S_38"} <= failed
