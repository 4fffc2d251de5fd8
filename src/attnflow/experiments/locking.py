"""Exclusive locks of run, task and sweep directories.

A process that writes a directory holds its lock (``fcntl.flock`` on ``DIR/.attnflow.lock``) for as long
as it writes: a second process is refused at once with :class:`DirectoryLockedError`, which says who
holds the lock (pid, host) and since when. The kernel drops a ``flock`` when its holder dies, even by
SIGKILL, so a lock left by a dead process is stale by construction and the next process takes it over;
the lock file itself is never deleted (deleting it would let two processes lock two different files).

``flock`` is per open file description: two locks of one directory in one process also exclude each
other. On network filesystems without ``flock`` support the lock is advisory at best (documented in
``docs/reliability.md``).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from .files import utc_now

__all__ = ["LOCK_FILE", "DirectoryLock", "DirectoryLockedError"]

LOCK_FILE = ".attnflow.lock"
#: How long a lock whose recorded holder is already dead (or dying) on this host is waited for: a killed
#: process releases its flock only once its last thread has exited, a few milliseconds after it died.
DYING_HOLDER_WAIT_S = 10.0

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock
    fcntl = None


class DirectoryLockedError(RuntimeError):
    """Another live process holds the lock of a directory."""


class DirectoryLock:
    """Exclusive lock of one directory, held from :meth:`acquire` (or ``with``) to :meth:`release`.

    Parameters
    ----------
    directory : path
        An existing directory.
    what : str
        How messages call it (``run directory``, ``sweep directory``).

    Examples
    --------
    >>> import tempfile
    >>> with DirectoryLock(tempfile.mkdtemp()) as lock:
    ...     lock.held
    True
    """

    def __init__(self, directory: str | Path, what: str = "directory"):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self.what = what
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> DirectoryLock:
        """Take the lock or raise :class:`DirectoryLockedError` naming its holder."""
        if self._fd is not None:
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                self._flock(fd)
            # the lock is ours (a stale holder, if any, is dead): record who holds it and since when
            info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": utc_now()})
            os.ftruncate(fd, 0)
            os.pwrite(fd, (info + "\n").encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def _flock(self, fd: int) -> None:
        deadline = time.monotonic() + DYING_HOLDER_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                holder = _holder(fd)
                dying = holder.get("host") == socket.gethostname() and _gone(holder.get("pid"))
                if not dying or time.monotonic() > deadline:
                    raise DirectoryLockedError(self._refusal(holder)) from None
                time.sleep(0.02)

    def _refusal(self, holder: dict) -> str:
        pid, host, since = (holder.get(k, "?") for k in ("pid", "host", "since"))
        who = f"process {pid} on {host} since {since}"
        return (
            f"the {self.what} {self.directory} is in use by {who} (lock {self.path}); wait for it to finish, "
            "stop it, or choose another output directory"
        )

    def release(self) -> None:
        """Drop the lock (the lock file stays; see the module docstring)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _holder(fd: int) -> dict:
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (ValueError, OSError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _gone(pid) -> bool:
    """Whether process ``pid`` of this host is dead or exiting (every thread a zombie)."""
    if type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    try:
        states = [
            (t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in Path(f"/proc/{pid}/task").iterdir()
        ]
    except OSError:
        return False  # no /proc (not Linux) or a race: treat as alive, the caller refuses
    return all(state in "ZX" for state in states)
