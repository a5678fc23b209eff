"""Workflows: ordered steps, gates and what passes between them."""

from flower.workflow.base import Ctx, Step, StepAbort, StepFailed, Workflow

__all__ = ["Ctx", "Step", "StepAbort", "StepFailed", "Workflow"]
