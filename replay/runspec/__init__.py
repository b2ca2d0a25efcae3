"""The run specification: `fields` (the settings every command shares, each with its flag,
default and check), `flags` (their command-line options), `model` (`RunSpec`, what a run's
manifest stores), `resolve` (the one layered resolution), `live` (`replay run`'s spec) and
`sweep` (`replay simulate`'s). Import the module you need; this package imports none."""
