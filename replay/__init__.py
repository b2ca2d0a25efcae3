"""Agent-trace replay harness: replay recorded coding-agent trajectories against inference
engines (live, emulated or simulated), measure prefix-cache behaviour, and price it."""

__version__ = "0.1.0"
