"""The workspace around the user's checkout: checkpoints of its files in a shadow repository."""

from kestrel.workspace.checkpoints import Checkpoint, CheckpointStore, FileChange
from kestrel.workspace.shadow_git import CheckpointError, GitFailed, UnknownCheckpoint

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointStore",
    "FileChange",
    "GitFailed",
    "UnknownCheckpoint",
]
