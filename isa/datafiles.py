"""Reading .npy and .npz data files, checked from their headers before any data is read.

A data file is untrusted: a 1 MB archive may hold a 1 GiB array, a sparse file may claim
terabytes, a member may not be numpy data at all. So every array's header (numpy's .npy header
readers) and, for an archive, the zip directory are read first, and the file is refused, located,
before its data is read when:

- it is not a regular file (a folder, a device such as /dev/zero, a pipe);
- its tensor name is not an input or param of the program (`check_name`);
- its shape is not the tensor's (`check_shape`), or its dtype holds Python objects (which would
  be unpickled: never);
- its data is shorter than the header says (truncated), or an archive member's uncompressed
  size disagrees with its header;
- an archive member is not a `.npy` file.

Only then is the array read, and it can be no larger than the tensor it feeds.
"""
from __future__ import annotations

import os
import stat
import zipfile

import numpy as np
import numpy.lib.format as npformat

from isa.errors import UserError

__all__ = ["open_regular", "read_npy", "npz_members", "read_member", "file_kind"]

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
#: the longest .npy header read (numpy's own default bound)
MAX_HEADER = 10_000


def open_regular(path: str, where: str):
    """An open binary file, or a located error when `path` is missing or not a regular file
    (a folder, device or pipe: never opened for reading, which could block or never end)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"no such file: {path}", where) from None
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}", where) from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{path} is a directory, not a .npy/.npz file", where)
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path} is not a regular file (a device, pipe or socket)", where)
    try:
        return open(path, "rb")
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}", where) from None


def file_kind(f) -> str:
    """'npy', 'npz' or 'other', from the first bytes; the file is left at its start."""
    head = f.read(6)
    f.seek(0)
    return "npy" if head == NPY_MAGIC else "npz" if head[:4] == ZIP_MAGIC else "other"


def _header(f, what: str, where: str):
    """(shape, fortran_order, dtype) of the .npy data at the file's position."""
    try:
        version = npformat.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(f, max_header_size=MAX_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = npformat.read_array_header_2_0(f, max_header_size=MAX_HEADER)
        else:
            raise ValueError(f".npy format version {version[0]}.{version[1]} is not read here")
    except UserError:
        raise
    except Exception as e:          # numpy's readers raise ValueError, OSError, SyntaxError...
        raise UserError(f"cannot read {what} as .npy data: {_short(e)}", where) from None
    if dtype.hasobject:
        raise UserError(f"cannot read {what}: it holds Python objects (pickled data, which is "
                        f"never loaded)", where)
    return tuple(shape), fortran, dtype


def _short(e: Exception) -> str:
    text = str(e) or type(e).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _nbytes(shape, dtype) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n * dtype.itemsize


def _read(f, shape, fortran, dtype, what: str, where: str) -> np.ndarray:
    count = _nbytes(shape, dtype) // max(dtype.itemsize, 1)
    need = _nbytes(shape, dtype)
    data = f.read(need)
    if len(data) < need:
        raise UserError(f"{what} is truncated: its header promises {need:,} bytes of data, it "
                        f"holds {len(data):,}", where)
    arr = np.frombuffer(data, dtype=dtype, count=count)
    order = "F" if fortran else "C"
    return arr.reshape(shape, order=order).copy(order="K")


def read_npy(path: str, where: str, check) -> np.ndarray:
    """The array of a .npy file; `check(shape, dtype)` may refuse it (a located UserError)
    from the header, before its data is read."""
    with open_regular(path, where) as f:
        kind = file_kind(f)
        if kind == "npz":
            raise UserError(f"{path} is an .npz archive, not a single .npy array", where,
                            hint="pass an archive as --inputs PATH")
        shape, fortran, dtype = _header(f, path, where)
        check(shape, dtype)
        size = os.fstat(f.fileno()).st_size
        if size - f.tell() < _nbytes(shape, dtype):
            raise UserError(f"{path} is truncated: its header promises {_nbytes(shape, dtype):,} "
                            f"bytes of data, the file holds {size - f.tell():,}", where)
        return _read(f, shape, fortran, dtype, path, where)


def npz_members(path: str, where: str, f) -> tuple[zipfile.ZipFile, list[tuple[str, zipfile.ZipInfo]]]:
    """The archive and its (tensor name, member) pairs, from the zip directory alone."""
    try:
        archive = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise UserError(f"cannot read {path} as .npz data: {_short(e)}", where) from None
    members = []
    for info in archive.infolist():
        if info.is_dir():
            continue
        if not info.filename.endswith(".npy"):
            archive.close()
            raise UserError(f"member '{info.filename[:100]}' of {path} is not .npy data (an "
                            f".npz archive holds NAME.npy members only)", where)
        members.append((info.filename[:-4], info))
    return archive, members


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, what: str, where: str,
                check) -> np.ndarray:
    """One member's array: header read and `check(shape, dtype)` called before its data."""
    try:
        with archive.open(info) as m:
            shape, fortran, dtype = _header(m, what, where)
            check(shape, dtype)
            header = m.tell() if m.seekable() else None
            need = _nbytes(shape, dtype)
            if header is not None and info.file_size != header + need:
                raise UserError(f"{what} is inconsistent: its header promises {need:,} bytes of "
                                f"data, the archive's directory {info.file_size - header:,}", where)
            return _read(m, shape, fortran, dtype, what, where)
    except UserError:
        raise
    except Exception as e:          # a corrupt member: bad CRC, bad compressed stream
        raise UserError(f"cannot read {what}: {_short(e)}", where) from None
