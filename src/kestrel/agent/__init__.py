"""The agent loop and its collaborators: state, budgets, loop detection, prompt, resume."""
