"""The client's view of an engine: protocol adapters, preflight checks, metrics scraping, the
bundled engine configs and the launcher of real engines. The emulator server is
`replay.emulator`; the client reaches it, like any engine, over HTTP."""
