"""Manifests as multi-document YAML: what `flowerbox kube render` prints. Apart from
flowerbox.kube.render, which stays plain dicts, because PyYAML is the `kube` extra's."""

from __future__ import annotations

from typing import Any

import yaml

from flowerbox.kube.pod import Manifest


class _Plain(yaml.SafeDumper):
    """No &anchors/*aliases for a dict met twice: a reviewer reads every field where it is."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(manifests: list[Manifest]) -> str:
    """Multi-document YAML, keys in the order written (kubectl apply -f - reads it)."""
    return yaml.dump_all(manifests, Dumper=_Plain, sort_keys=False, default_flow_style=False)
