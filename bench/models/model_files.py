"""Files every subcommand writes, written atomically, and the small shared
pieces: the user-error exception, seeded random generators, name
sanitising, the checks a finished model passes.

Every output is first written to a temporary file in the destination's
folder and then renamed over the destination, so a reader (a Rust test, a
second run) never sees half a file.
"""

import json
import os
import re
import tempfile
import zlib
from pathlib import Path

import numpy as np
import onnx

# The newest IR version ONNX Runtime 1.20+ reads; helper.make_model stamps
# the onnx package's own (newer) one.
MAX_IR_VERSION = 10


class BadInput(Exception):
    """A mistake in what the user asked for: printed as `error: ...`, exit 2."""


def _atomic_write(path, write):
    """Calls write(file object) on a temporary file next to `path`, then
    renames it to `path`. Creates the parent folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_bytes(path, data):
    _atomic_write(path, lambda f: f.write(data))


def write_json(path, value):
    write_bytes(path, (json.dumps(value, indent=2) + "\n").encode())


def write_npy(path, array):
    # (not np.ascontiguousarray: it makes a 0-d array 1-d)
    _atomic_write(path, lambda f: np.save(f, np.asarray(array, order="C"), allow_pickle=False))


def write_model(path, model):
    """Serialises `model` (already checked) to `path`."""
    write_bytes(path, model.SerializeToString())


def finish_model(model, full_check=True):
    """Caps the IR version at what ORT reads and runs the ONNX checker
    (full_check also runs strict shape inference). Returns the model."""
    model.ir_version = min(model.ir_version, MAX_IR_VERSION)
    onnx.checker.check_model(model, full_check=full_check)
    return model


def rng_for(seed, *names):
    """A generator determined by the seed and the names only (not by the
    order tensors are made in): the same tensor gets the same values when
    other tensors are added or removed."""
    key = zlib.crc32("/".join(names).encode())
    return np.random.default_rng([seed & 0xFFFFFFFF, key])


def sanitise(name):
    """A tensor name as a file-name part: runs of anything but letters,
    digits, '.', '-' and '_' become one '_'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "unnamed"
