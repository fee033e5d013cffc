"""The evaluation harness: run Kestrel on a suite of tasks and score each session from its log."""
