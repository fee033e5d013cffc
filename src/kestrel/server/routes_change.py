"""Routes for what a session changed and spent: its patch and bundle, checkpoints and usage."""

from __future__ import annotations

from fastapi import APIRouter

from kestrel.server.deps import ERRORS

router = APIRouter(responses=ERRORS)
