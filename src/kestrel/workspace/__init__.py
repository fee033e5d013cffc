"""The workspace around the user's checkout: checkpoints of its files in a shadow repository.

The names below are imported when first used, so that a light command that needs one small
module of this package (every command checks `apply_lock` for an apply a killed process left
half done) does not load the checkpoint store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kestrel.lazy_names import lazy_attributes

if TYPE_CHECKING:
    from kestrel.workspace.checkpoints import (
        Checkpoint as Checkpoint,
    )
    from kestrel.workspace.checkpoints import (
        CheckpointStore as CheckpointStore,
    )
    from kestrel.workspace.checkpoints import (
        FileChange as FileChange,
    )
    from kestrel.workspace.shadow_git import (
        CheckpointError as CheckpointError,
    )
    from kestrel.workspace.shadow_git import (
        GitFailed as GitFailed,
    )
    from kestrel.workspace.shadow_git import (
        UnknownCheckpoint as UnknownCheckpoint,
    )

_WHERE = {
    "Checkpoint": "checkpoints",
    "CheckpointError": "shadow_git",
    "CheckpointStore": "checkpoints",
    "FileChange": "checkpoints",
    "GitFailed": "shadow_git",
    "UnknownCheckpoint": "shadow_git",
}

__all__ = sorted(_WHERE)


__getattr__ = lazy_attributes(__name__, _WHERE)
