"""Whether a tool call may run: permission modes now; rules, hooks and the classifier later."""
