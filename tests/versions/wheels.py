"""Small wheels made on the spot, in a find-links directory: real packages for uv to
resolve and install, offline and in a second."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(where: Path, name: str, version: str, source: str, requires: tuple[str, ...] = ()) -> Path:
    """``name-version-py3-none-any.whl`` in ``where``: one module ``name`` with
    ``source``, and ``requires`` as its dependencies."""
    where.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": source.encode(),
        f"{info}/METADATA": ("Metadata-Version: 2.1\n" f"Name: {name}\n" f"Version: {version}\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: shrinkgpu-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},{_digest(data)},{len(data)}\n" for path, data in files.items()) + f"{info}/RECORD,,\n"
    path = where / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name_in, data in files.items():
            whl.writestr(name_in, data)
        whl.writestr(f"{info}/RECORD", record)
    return path


def lib_source(version: str, breaks_at: str) -> str:
    """A library whose ``scale`` raises from ``breaks_at`` on, as an API change would."""
    from packaging.version import Version

    broken = Version(version) >= Version(breaks_at)
    body = ("    raise TypeError('scale() takes a factor keyword since 1.2')\n" if broken
            else "    return [x * 2 for x in xs]\n")
    return f"VERSION = {version!r}\n\n\ndef scale(xs):\n{body}"
