"""Workflows: ordered steps, gates and what passes between them."""

from flower.workflow.base import Ctx, RunState, Step, StepAbort, StepFailed, Workflow

__all__ = ["Ctx", "RunState", "Step", "StepAbort", "StepFailed", "Workflow"]
