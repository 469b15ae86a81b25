"""Copying a folder tree that its owner may still be changing, as root, keeping what the
files are: sparse files stay sparse, hard links stay links, symlinks stay symlinks (never
followed), modes and modification times are kept; named pipes, sockets and device nodes
are left out with a note. Ownership is the caller's to set afterwards.

The walk never resolves a path below the source: it holds a descriptor of each
directory on the way down and opens every name below it with O_NOFOLLOW, so a name the
owner swaps for a symlink (to /etc/shadow, say) mid-copy fails to open instead of being
read through; such a name is left out with a note.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MAX_DEPTH", "CopyReport", "copy_tree"]

_log = logging.getLogger(__name__)

MAX_DEPTH = 256
"""Directories nested deeper are left out with a note: each level being copied holds
two open descriptors."""

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""O_NONBLOCK: a name swapped for a named pipe between the look and the open does not
block the copy (the open's fstat then refuses it)."""
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = {
    stat.S_IFIFO: "named pipe",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}
_CHANGED = "it changed while it was copied"
_LEFT_OUT = {
    # Opening a name that was swapped for a symlink, a file or a socket:
    errno.ELOOP: _CHANGED,
    errno.ENOTDIR: _CHANGED,
    errno.ENXIO: _CHANGED,
    # O_NONBLOCK's open of a file under a lease, instead of waiting for the lease to end:
    errno.EWOULDBLOCK: "a process holds a lease on it",
}
_UNREADABLE = (errno.EACCES, errno.EPERM)
_NO_COPY_RANGE = (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP)
_CHUNK = 1 << 20


@dataclass
class CopyReport:
    """What a copy left out, each as a path that starts with the source folder's name."""

    skipped: list[str] = field(default_factory=list)
    """Notes of entries deliberately left out: "skipped named pipe work/p"."""
    unreadable: list[str] = field(default_factory=list)
    """Entries that could not be read (their owner took away the permission): "work/f
    (Permission denied)"."""

    @property
    def notes(self) -> list[str]:
        """Everything left out, one line each."""
        return [*self.skipped, *(f"could not read {entry}" for entry in self.unreadable)]

    def log(self, what: str) -> None:
        """Logs each note as a warning, so a user sees what `what` left out."""
        for note in self.notes:
            _log.warning("%s: %s", what, note)


def copy_tree(source: Path, target: Path, *, skip: Collection[str] = ()) -> CopyReport:
    """Copies what is below `source` into `target` (made if missing; its own mode is the
    caller's); `skip`: names at the top of `source` to leave out. `source` itself must
    not be a symlink (pass it resolved); nothing below it is ever followed. What cannot
    be copied is in the report; OSError is raised for the rest (a full disk)."""
    report = CopyReport()
    target.mkdir(mode=0o700, exist_ok=True)
    try:
        source_fd = os.open(source, _DIRECTORY)
    except PermissionError as exc:
        report.unreadable.append(f"{source.name} ({exc.strerror})")
        return report
    try:
        target_fd = os.open(target, _DIRECTORY)
        try:
            _Walk(source.name, target_fd, report).tree(source_fd, target_fd, "", 0, skip)
        finally:
            os.close(target_fd)
    finally:
        os.close(source_fd)
    return report


class _Changed(Exception):
    """An entry is no longer what the walk saw a moment ago (its owner is changing it)."""


class _Walk:
    def __init__(self, label: str, target_root: int, report: CopyReport) -> None:
        self.label = label
        self.target_root = target_root
        self.report = report
        self.copies: dict[tuple[int, int], str] = {}
        """(st_dev, st_ino) of a file with several links -> its first copy, relative to
        the target's top."""

    def tree(self, src: int, dst: int, path: str, depth: int, skip: Collection[str] = ()) -> None:
        for name in sorted(os.listdir(src)):
            if name in skip:
                continue
            rel = f"{path}/{name}" if path else name
            shown = f"{self.label}/{rel}"
            try:
                self.entry(src, dst, name, rel, depth)
            except FileNotFoundError:
                continue  # removed since the listing: not part of the copy
            except _Changed:
                self.report.skipped.append(f"skipped {shown}: {_CHANGED}")
            except OSError as exc:
                if exc.errno in _UNREADABLE:
                    self.report.unreadable.append(f"{shown} ({exc.strerror})")
                elif exc.errno in _LEFT_OUT:
                    self.report.skipped.append(f"skipped {shown}: {_LEFT_OUT[exc.errno]}")
                else:
                    raise

    def entry(self, src: int, dst: int, name: str, rel: str, depth: int) -> None:
        info = os.stat(name, dir_fd=src, follow_symlinks=False)
        kind = stat.S_IFMT(info.st_mode)
        if kind == stat.S_IFLNK:
            try:
                link = os.readlink(name, dir_fd=src)
            except OSError as exc:  # EINVAL: no longer a symlink
                raise _Changed from exc
            os.symlink(link, name, dir_fd=dst)
            times = (info.st_atime_ns, info.st_mtime_ns)
            os.utime(name, ns=times, dir_fd=dst, follow_symlinks=False)
        elif kind == stat.S_IFDIR:
            self.directory(src, dst, name, rel, depth + 1)
        elif kind == stat.S_IFREG:
            self.regular(src, dst, name, rel)
        else:
            what = _KINDS.get(kind, "special file")
            self.report.skipped.append(f"skipped {what} {self.label}/{rel}")

    def directory(self, src: int, dst: int, name: str, rel: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.report.skipped.append(
                f"skipped directory {self.label}/{rel}: nested deeper than {MAX_DEPTH} levels"
            )
            return
        inner_src = os.open(name, _DIRECTORY, dir_fd=src)
        try:
            info = os.fstat(inner_src)
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=dst)
            inner_dst = os.open(name, _DIRECTORY, dir_fd=dst)
            try:
                self.tree(inner_src, inner_dst, rel, depth)
                # After its entries: writing them changed its time, a read-only mode
                # would have refused them.
                os.fchmod(inner_dst, stat.S_IMODE(info.st_mode))
                os.utime(inner_dst, ns=(info.st_atime_ns, info.st_mtime_ns))
            finally:
                os.close(inner_dst)
        finally:
            os.close(inner_src)

    def regular(self, src: int, dst: int, name: str, rel: str) -> None:
        fd = os.open(name, _FILE, dir_fd=src)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _Changed
            key = (info.st_dev, info.st_ino)
            first = self.copies.get(key) if info.st_nlink > 1 else None
            if first is not None:
                with contextlib.suppress(OSError):  # a path too long: copied instead
                    os.link(
                        first,
                        name,
                        src_dir_fd=self.target_root,
                        dst_dir_fd=dst,
                        follow_symlinks=False,
                    )
                    return
            out = os.open(name, _NEW_FILE, 0o600, dir_fd=dst)
            try:
                _copy_data(fd, out, info.st_size)
                # Never a set-uid program of root's: a copy made as root is root's until
                # the caller hands it on.
                os.fchmod(out, stat.S_IMODE(info.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
                os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
            finally:
                os.close(out)
            if info.st_nlink > 1:
                self.copies.setdefault(key, rel)
        finally:
            os.close(fd)


def _copy_data(source: int, target: int, size: int) -> None:
    """The first `size` bytes of `source` into `target`, holes left as holes."""
    for start, end in _extents(source, size):
        _copy_range(source, target, start, end)
    os.ftruncate(target, size)


def _extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each stretch of data below `size`; the whole file where the file
    system cannot tell data from holes."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return  # only a hole is left (or the file shrank)
            if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            start, end = offset, size
        if start >= size:
            return
        yield start, end
        offset = end


def _copy_range(source: int, target: int, start: int, end: int) -> None:
    offset = start
    while offset < end:
        try:
            done = os.copy_file_range(source, target, end - offset, offset, offset)
        except OSError as exc:
            if exc.errno not in _NO_COPY_RANGE:
                raise
            done = _plain_copy(source, target, offset, end)
        if done == 0:
            return  # the file shrank while it was copied
        offset += done


def _plain_copy(source: int, target: int, start: int, end: int) -> int:
    """Read and write, where copy_file_range cannot; the bytes copied."""
    offset = start
    while offset < end:
        chunk = os.pread(source, min(_CHUNK, end - offset), offset)
        if not chunk:
            break
        offset += os.pwrite(target, chunk, offset)
    return offset - start
