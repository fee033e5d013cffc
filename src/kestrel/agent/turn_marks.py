"""Where each recent model request stood, so a loop can be undone back to before it began."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from kestrel.protocol.events import (
    CheckpointCreated,
    FileChanged,
    ModelRequestStarted,
    Record,
    Rewound,
    ToolCallRequested,
    ToolFinished,
    UserMessage,
)
from kestrel.protocol.messages import Message

MAX_MARKS = 64
"""Recent model requests remembered; a loop is caught long before it is this many turns old."""


@dataclass(frozen=True, slots=True)
class TurnMark:
    """The conversation a model request was sent, and the checkpoint holding the files then."""

    seq: int
    """The `model_request_started` event's sequence number."""
    messages: tuple[Message, ...]
    calls: frozenset[str]
    """Ids of the calls requested before this request."""
    finished: frozenset[str]
    """Ids of the calls that had a result before this request."""
    checkpoint_id: str | None
    files: str = ""
    """The files as the request was sent (`TurnMarks.files_key` then)."""


@dataclass(slots=True)
class TurnMarks:
    """Recent requests' conversations, and which request asked for each call."""

    before: dict[int, TurnMark] = field(default_factory=dict)
    call_turns: dict[str, int] = field(default_factory=dict)
    """The `model_request_started` seq of the turn that asked for each call."""
    files: str | None = None
    """The checkpoint that holds the files as they are now, when one does."""
    trees: dict[str, str] = field(default_factory=dict)
    """The tree id of each checkpoint that reported one: equal trees are the same files."""
    result_files: dict[str, str] = field(default_factory=dict)
    """For each finished call, which files it ran on (`files_key` when its result came)."""
    written: dict[str, str] = field(default_factory=dict)
    """What each edit tool last wrote to each path, for sessions without checkpoints."""
    request_seq: int = 0
    last_user_seq: int = 0
    recoveries: int = 0
    """How many times a loop was undone in this session (`loop_recovered` events)."""

    def observe(
        self,
        record: Record,
        messages: Iterable[Message],
        calls: Mapping[str, object],
        finished: Mapping[str, object],
    ) -> None:
        """Fold one record, given the conversation and calls as they stand before it."""
        event = record.event
        match event:
            case UserMessage():
                self.last_user_seq = record.seq
            case ModelRequestStarted():
                self.request_seq = record.seq
                self.before[record.seq] = TurnMark(
                    record.seq,
                    tuple(messages),
                    frozenset(calls),
                    frozenset(finished),
                    self.files,
                    self.files_key,
                )
                while len(self.before) > MAX_MARKS:
                    del self.before[next(iter(self.before))]
            case ToolCallRequested():
                self.call_turns[event.call.id] = self.request_seq
            case CheckpointCreated():
                if self.files is None:
                    # The first checkpoint records the files before any change, so it holds
                    # them for every earlier request too.
                    for seq, mark in self.before.items():
                        self.before[seq] = replace(mark, checkpoint_id=event.checkpoint_id)
                self.files = event.checkpoint_id
                if event.tree:
                    self.trees[event.checkpoint_id] = event.tree
            case FileChanged():
                self.written[event.path] = event.after_hash or ""
            case ToolFinished():
                self.result_files[event.call_id] = self.files_key
            case Rewound():
                self.files = event.checkpoint_id

    @property
    def files_key(self) -> str:
        """Names the files as they are now: equal keys, the same files (when checkpoints record
        trees); empty before the first checkpoint."""
        if self.files is not None:
            return self.trees.get(self.files, self.files)
        if not self.written:
            return ""
        listing = "\0".join(f"{path}\0{digest}" for path, digest in sorted(self.written.items()))
        return "edits:" + hashlib.sha256(listing.encode()).hexdigest()[:16]

    def target(self, first_call: str) -> TurnMark | None:
        """The request to go back to for a loop that began with `first_call`: the one that asked
        for it, never one before the person's latest message; None when none is remembered."""
        floor = max(self.call_turns.get(first_call, 0), self.last_user_seq)
        kept = [seq for seq in self.before if seq >= floor]
        return self.before[min(kept)] if kept else None
