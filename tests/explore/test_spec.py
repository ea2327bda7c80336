"""The explore spec: validated as a whole, every problem located at SPEC: key.path with a message
a user can act on."""
import textwrap

import pytest

from fractal.explore.spec import load_spec
from isa.errors import ErrorGroup, UserError

GOOD = """
machine = "tiny"

[[workload]]
gen = "logreg"
dtype = "f16"

[vary]
frequency_hz = [0.5e9, 1e9]

[vary.level.root]
memory_bandwidth = { from = 16, to = 64, factor = 2 }

[constraints]
area_mm2 = "base"

[search]
objectives = ["latency", "energy"]
"""


def errors_of(tmp_path, text: str) -> list[tuple[str, str]]:
    path = tmp_path / "spec.toml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(UserError) as info:
        load_spec(path)
    e = info.value
    return [(str(x.where).replace(str(tmp_path) + "/", ""), x.message)
            for x in (e.errors if isinstance(e, ErrorGroup) else [e])]


def test_a_good_spec_loads_with_its_space(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(GOOD)
    spec = load_spec(path)
    assert [(p.name, p.values) for p in spec.parameters] == [
        ("frequency_hz", (0.5e9, 1e9)), ("level.root.memory_bandwidth", (16, 32, 64))]
    assert spec.size == 6 and spec.method == "grid"          # auto: 6 points <= 100 trials
    assert spec.constraints == (("area_mm2", "base"),) and spec.base.name == "tiny"
    assert [w.label for w in spec.workloads] == ["logreg-f16"]


@pytest.mark.parametrize("edit, where, message", [
    (("machine = \"tiny\"", "machine = \"tinny\""), "spec.toml: machine",
     "unknown machine 'tinny' (presets: tiny, f1, f100, or a .toml file)"),
    (("[search]", "[search]\ncolour = 1"), "spec.toml: search.colour", "unknown key 'colour'"),
    (("gen = \"logreg\"", "gen = \"logregg\""), "spec.toml: workload[0].gen",
     "unknown workload 'logregg'"),
    (("gen = \"logreg\"", "program = \"missing.fasm\""), "spec.toml: workload[0].dtype",
     "'dtype' is for a gen workload; a program file states its own"),
    (("dtype = \"f16\"", "weight = -1"), "spec.toml: workload[0].weight",
     "'weight' must be a positive number, got -1"),
    (("frequency_hz = [0.5e9, 1e9]", "frequency_hz = [0.5e9, 1e12]"), "spec.toml: vary.frequency_hz",
     "value 1000000000000.0: 'frequency_hz' must lie in the range 1 kHz to 100 GHz, got 1e+12"),
    (("frequency_hz = [0.5e9, 1e9]", "frequency = [1e9]"), "spec.toml: vary.frequency",
     "unknown key 'frequency' (vary: frequency_hz, process_nm, depth, fanout, level, compute)"),
    (("frequency_hz = [0.5e9, 1e9]", "frequency_hz = []"), "spec.toml: vary.frequency_hz",
     "no values: give a list of one or more"),
    (("frequency_hz = [0.5e9, 1e9]", "frequency_hz = [{}, 1e9]"), "spec.toml: vary.frequency_hz[0]",
     "a value is a number, a string or a list of numbers, got {}"),
    (("[vary.level.root]", "[vary.level.cluster]"), "spec.toml: vary.level.cluster",
     "no level 'cluster': name one by root, leaf, all, its index (0 is the root) or its name "
     "(root, leaf)"),
    (("memory_bandwidth = {", "memory_bandwith = {"), "spec.toml: vary.level.root.memory_bandwith",
     "unknown level field 'memory_bandwith'"),
    (("factor = 2", "factor = 2, step = 2"), "spec.toml: vary.level.root.memory_bandwidth",
     "a range needs one of 'step' (from, from + step, ...) or 'factor' (from, from x factor, ...)"),
    (("from = 16, to = 64", "from = 64, to = 16"), "spec.toml: vary.level.root.memory_bandwidth",
     "empty range: 'from' (64) is above 'to' (16)"),
    (("area_mm2 = \"base\"", "area = 3"), "spec.toml: constraints.area",
     "unknown constraint 'area' (one of area_mm2, power_w, leaves)"),
    (("area_mm2 = \"base\"", "area_mm2 = -3"), "spec.toml: constraints.area_mm2",
     "'area_mm2' must be a positive number or \"base\" (the base machine's own), got -3"),
    (("\"latency\", \"energy\"", "\"latency\", \"speed\""), "spec.toml: search.objectives",
     "unknown objective 'speed' (one of latency, energy, edp, perf_per_mm2, perf_per_w, area, "
     "power)"),
    (("objectives = [\"latency\", \"energy\"]", "objectives = [\"latency\"]\nmethod = \"anneal\""),
     "spec.toml: search.method", "unknown method 'anneal' (one of auto, grid, nsga2, tpe)"),
])
def test_each_problem_is_located_at_its_key(tmp_path, edit, where, message):
    old, new = edit
    assert old in GOOD
    found = errors_of(tmp_path, GOOD.replace(old, new, 1))
    assert (where, message) in found, found


def test_every_problem_is_reported_at_once(tmp_path):
    text = GOOD.replace("weight", "x").replace("[0.5e9, 1e9]", "[0]").replace(
        "\"latency\", \"energy\"", "\"speed\"").replace("area_mm2 = \"base\"", "volume = 1")
    where = {w for w, _ in errors_of(tmp_path, text)}
    assert where == {"spec.toml: vary.frequency_hz", "spec.toml: constraints.volume",
                     "spec.toml: search.objectives"}


def test_a_numbered_level_must_exist_at_every_depth_and_a_grid_has_a_limit(tmp_path):
    text = GOOD.replace("[vary.level.root]", "depth = [1, 2]\n[vary.level.2]")
    assert ("spec.toml: vary.level.2.memory_bandwidth",
            "level 2 is not a level of every machine of the space (depths 1, 2)") \
        in errors_of(tmp_path, text)
    text = GOOD.replace("objectives = [\"latency\", \"energy\"]",
                        "objectives = [\"latency\"]\nmethod = \"grid\"").replace(
        "frequency_hz = [0.5e9, 1e9]", "frequency_hz = { from = 1e6, to = 1e9, step = 1e5 }\n"
        "process_nm = { from = 5, to = 40, step = 1 }")
    found = errors_of(tmp_path, text)
    assert any(w == "spec.toml: search.method" and "over the limit of 100,000" in m
               for w, m in found), found


def test_a_toml_syntax_error_is_located_at_its_line(tmp_path):
    [(where, message)] = errors_of(tmp_path, GOOD.replace("[search]", "[search"))
    assert where.startswith("spec.toml:") and where.count(":") == 2, where
    assert message.startswith("invalid TOML")
