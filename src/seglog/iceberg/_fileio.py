"""A pyiceberg FileIO that makes what it writes to a local warehouse durable: every data,
manifest, manifest-list and metadata file is fsynced, and its directory, when it is
closed — before the catalog commit that references it — so a power cut after a commit
never leaves the table pointing at a file whose tail was lost. Other schemes (an object
store) are written as pyiceberg's ``PyArrowFileIO`` writes them.

Selected by the catalog property ``py-io-impl`` (:data:`SYNCED_FILE_IO`), which
``catalog_properties`` sets for a local (``file://``) warehouse.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import Any

from pyiceberg.io import OutputStream
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO

__all__ = ["SyncedFileIO"]


class _SyncedStream:
    """A local file written through a Python file object, fsynced (file, then directory)
    on close. What pyiceberg's writers need of an output stream: ``write``, ``tell``,
    ``flush``, ``close``, a context manager (pyarrow's ParquetWriter takes it as a Python
    file)."""

    def __init__(self, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.closed = False

    def write(self, data: Any) -> int:
        return self._file.write(data)

    def tell(self) -> int:
        return self._file.tell()

    def flush(self) -> None:
        self._file.flush()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        fd = os.open(os.path.dirname(self._path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> _SyncedStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _SyncedFile(PyArrowFile):
    def create(self, overwrite: bool = False) -> OutputStream:
        if not overwrite and self.exists():
            raise FileExistsError(f"Cannot create file, already exists: {self.location}")
        return _SyncedStream(self._path)


class SyncedFileIO(PyArrowFileIO):
    """``PyArrowFileIO`` whose local output files are fsynced on close."""

    def new_output(self, location: str) -> PyArrowFile:
        scheme, netloc, path = self.parse_location(location, self.properties)
        if scheme not in ("", "file"):
            return super().new_output(location)
        return _SyncedFile(
            fs=self.fs_by_scheme(scheme, netloc), location=location, path=path,
        )  # fmt: skip
