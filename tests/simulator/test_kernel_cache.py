"""The compiled kernels' disk cache (simulator/__init__.py): kept in a folder named by a digest of
every module of the simulator, so that a kernel inlining a function of another module never runs
a stale copy of it after that module changes."""
import importlib.util
import os
import shutil
import time

import numba

import simulator
from simulator.kernels import warm_up


def _package_copy(tmp_path):
    """A copy of the simulator's modules and its kernel_cache_dir, reading that copy."""
    folder = tmp_path / "simulator_copy"
    shutil.copytree(os.path.dirname(simulator.__file__), folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    spec = importlib.util.spec_from_file_location("simulator_copy", folder / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return folder, module.kernel_cache_dir


def test_numba_caches_the_kernels_in_the_digest_folder():
    assert numba.config.CACHE_DIR == simulator.kernel_cache_dir()
    assert os.sep + "fractal-kernels" + os.sep in numba.config.CACHE_DIR
    warm_up()
    found = [f for _, _, files in os.walk(numba.config.CACHE_DIR) for f in files]
    assert any(f.endswith(".nbi") for f in found)


def test_a_change_to_any_module_is_a_new_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    folder, cache_dir = _package_copy(tmp_path)
    before = cache_dir()
    assert cache_dir() == before                        # the same sources, the same folder
    narrow = folder / "narrow.py"                       # inlined by the leaf batches' kernels
    narrow.write_text(narrow.read_text() + "\n# changed\n")
    assert cache_dir() != before


def test_the_folder_is_under_numba_cache_dir_where_it_is_set(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    got = simulator.kernel_cache_dir()
    assert got.startswith(os.path.join(str(tmp_path / "numba"), "fractal-kernels") + os.sep)


def test_other_versions_folders_unwritten_for_a_month_are_removed(tmp_path):
    # beside the current folder: another version's, 31 days old (removed) and 29 days old
    # (kept), and a 31-day-old folder whose name is not a digest (kept)
    base = tmp_path / "fractal-kernels"
    current, old, recent, other = (base / n for n in ("0123456789abcdef", "fedcba9876543210",
                                                      "00000000000000aa", "notes"))
    for folder in (current, old, recent, other):
        folder.mkdir(parents=True)
        (folder / "k.nbi").write_bytes(b"")
    now = time.time()
    for folder, days in ((current, 40), (old, 31), (recent, 29), (other, 31)):
        os.utime(folder, (now - days * 86400, now - days * 86400))
    assert simulator.prune_stale(str(current)) == [str(old)]
    assert sorted(p.name for p in base.iterdir()) == ["00000000000000aa", "0123456789abcdef", "notes"]
    assert simulator.prune_stale(str(tmp_path / "absent" / "0123456789abcdef")) == []
