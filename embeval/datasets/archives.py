"""Reading downloaded archives: zip, tar(.gz), single-file gzip, MSI installers and plain files.

An Archive is opened from a downloaded file; `check()` reads every byte once so corruption and
truncation are found before anything is unpacked (zip and gzip CRCs, tar structure, cabinet
checksums). Members are read by their path inside the archive; `tree(folder)` lists the files
under a folder. Any failure is an ArchiveError naming the archive file.
"""

import gzip
import tarfile
import zipfile
import zlib
from pathlib import PurePosixPath

from embeval.datasets.msi import ArchiveError, extract_msi


def kind_of(name):
    """The archive kind a download's file name announces."""
    lower = name.lower()
    if lower.endswith(".zip"):
        return "zip"
    if lower.endswith((".tar.gz", ".tgz", ".tar")):
        return "tar"
    if lower.endswith(".gz"):
        return "gzip"
    if lower.endswith(".msi"):
        return "msi"
    return "plain"


def _safe(member):
    path = PurePosixPath(member)
    if path.is_absolute() or ".." in path.parts:
        raise ArchiveError(f"unsafe member path {member!r} in archive")
    return str(path)


class Archive:
    """A downloaded file read as the archive its name says it is."""

    def __init__(self, path, kind=None):
        self.path = path
        self.kind = kind or kind_of(path.name)
        self._msi_files = None

    def _fail(self, err):
        detail = str(err) or type(err).__name__
        return ArchiveError(f"corrupt or truncated {self.kind} archive ({detail})", file=self.path)

    def check(self):
        """Read the whole archive once; raise ArchiveError if it is corrupt or truncated."""
        try:
            if self.kind == "zip":
                with zipfile.ZipFile(self.path) as archive:
                    bad = archive.testzip()
                    if bad is not None:
                        raise ArchiveError(f"member {bad} fails its CRC")
            elif self.kind == "tar":
                with tarfile.open(self.path, "r:*") as archive:
                    for info in archive:
                        if info.isfile():
                            archive.extractfile(info).read()
                with open(self.path, "rb") as head:
                    compressed = head.read(2) == b"\x1f\x8b"
                if compressed:
                    self._read_through_gzip()
            elif self.kind == "gzip":
                self._read_through_gzip()
            elif self.kind == "msi":
                self._msi()
        except ArchiveError as err:
            raise self._fail(err.message)
        except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error) as err:
            raise self._fail(err)

    def _read_through_gzip(self):
        with gzip.open(self.path) as stream:
            while stream.read(1 << 20):
                pass

    def _msi(self):
        if self._msi_files is None:
            self._msi_files = extract_msi(self.path.read_bytes())
        return self._msi_files

    def read(self, member=None):
        """The bytes of one member (plain and gzip archives: the whole content)."""
        try:
            if self.kind == "plain":
                return self.path.read_bytes()
            if self.kind == "gzip":
                with gzip.open(self.path) as stream:
                    return stream.read()
            if self.kind == "msi":
                files = self._msi()
                if member not in files:
                    raise ArchiveError(f"no file {member} in the installer's cabinets")
                return files[member]
            if self.kind == "zip":
                with zipfile.ZipFile(self.path) as archive:
                    return archive.read(member)
            with tarfile.open(self.path, "r:*") as archive:
                stream = archive.extractfile(member)
                if stream is None:
                    raise ArchiveError(f"{member} is not a file")
                return stream.read()
        except KeyError:
            raise ArchiveError(f"archive has no member {member}", file=self.path)
        except ArchiveError as err:
            raise ArchiveError(err.message, file=self.path)
        except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error) as err:
            raise self._fail(err)

    def open_plain(self):
        """A binary stream over a plain download (for copying large files without loading them)."""
        return open(self.path, "rb")

    def tree(self, folder):
        """{path relative to folder: bytes} for every regular file under folder/ in the archive."""
        prefix = folder.rstrip("/") + "/"
        out = {}
        try:
            if self.kind == "zip":
                with zipfile.ZipFile(self.path) as archive:
                    for info in archive.infolist():
                        if info.filename.startswith(prefix) and not info.is_dir():
                            out[_safe(info.filename[len(prefix) :])] = archive.read(info)
            elif self.kind == "tar":
                with tarfile.open(self.path, "r:*") as archive:
                    for info in archive:
                        if info.name.startswith(prefix) and info.isfile():
                            out[_safe(info.name[len(prefix) :])] = archive.extractfile(info).read()
            else:
                raise ArchiveError(f"a {self.kind} archive has no folders")
        except ArchiveError as err:
            raise ArchiveError(err.message, file=self.path)
        except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error) as err:
            raise self._fail(err)
        if not out:
            raise ArchiveError(f"archive has no folder {folder}", file=self.path)
        return out


def as_text_lines(data):
    """Split bytes into lines the way line tools see them: (lines without \\n, ends with \\n)."""
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines.pop()
    return lines, ends_with_newline
