"""An index worker process: reads the batches of files it is sent, at a lower priority.

Run as `python -m kestrel.context.read_worker NICENESS` by `kestrel.context.reader`; each message
on stdin is a pickled `(root, entries)`, each answer on stdout the pickled list of read files.
The loop ends when stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import cast

from kestrel.context.inventory import Entry
from kestrel.context.reader import read_batch, receive_message, send_message


def main() -> None:
    """Lower the priority, keep stdout for answers only, and serve until stdin closes."""
    # A Ctrl-C at the terminal reaches the whole process group: the session handles it (and
    # stops the read, closing stdin). Not a session of its own instead: where the kernel
    # groups processes by session for scheduling, that would undo the lower priority.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    niceness = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    with contextlib.suppress(OSError):
        os.nice(niceness)
    answers = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not break the answers
    requests = sys.stdin.buffer
    while True:
        try:
            request = receive_message(requests)
        except EOFError:
            return
        root, entries = cast("tuple[str, list[Entry]]", request)
        send_message(answers, read_batch(root, entries))


if __name__ == "__main__":
    main()
