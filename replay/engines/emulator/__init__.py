"""Engine emulators: the simulator's engine model behind a real HTTP server."""
