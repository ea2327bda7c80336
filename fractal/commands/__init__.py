"""Subcommands of `fractal` beyond the core ones in `fractal.cli`: each module here defines
`register(subparsers)`, which adds its parser with `handler=...` as a default. The shared
argument helpers (`machine_args`, `positive_int`, ...) live in `fractal.cli`."""
