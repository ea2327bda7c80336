"""The machine description: a fractal machine as a tree of uniform levels, root to leaf.

Machine files (TOML) are validated and built into frozen dataclasses (`machine/description.py`);
the shipped presets live in `machine/presets/`, the silicon area of each level comes from
`machine/area.py`, and the limits on the size of a machine the tool agrees to model are in
`machine/limits.py`. The package imports nothing of ours but `isa.errors`, so
the compiler, the simulator and the front end may all use it.
"""
from machine.description import (DEFAULT_BUFFERING, DTYPE_NAMES, OP_CLASSES, PRESET_DIR, PRESETS,
                                 Compute, Level, Machine, load_machine, machine_from_dict, preset,
                                 read_toml)
from machine.area import machine_area
from machine.limits import check_machine_shape

__all__ = ["Machine", "Level", "Compute", "load_machine", "machine_from_dict", "preset", "read_toml",
           "PRESETS", "PRESET_DIR", "OP_CLASSES", "DEFAULT_BUFFERING", "DTYPE_NAMES",
           "check_machine_shape", "machine_area"]
