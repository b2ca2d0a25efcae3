"""Command-line layer: one module per command group, registered in `replay.cli`.

Only this layer prints (with rich); the libraries below it return data.
"""
