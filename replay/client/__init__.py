"""The live replay client: the workload against real engines over HTTP.

- `config`: engine specs from flags or a YAML file.
- `session`: one engine's session slots, turns, subagents, retries; `LiveStats`.
- `ideal`: the ideal-prefix index (what an unbounded cache could have resumed from).
- `orchestrate`: a whole run (preflight, manifest, every engine at once, scraping, summary).
- `panel`: the live panel's renderables.

Prompts come from `replay.prompts`; the HTTP side is `replay.engines.adapters`.
"""
