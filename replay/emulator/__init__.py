"""Engine emulators: the simulator's engine model behind a real HTTP server
(`python -m replay.emulator` or `replay serve-sim`). The client reaches it over HTTP, as it
reaches a real engine (`replay.engines`)."""
