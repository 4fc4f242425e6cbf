"""One sweep per folder: a lock file in the sweep folder, held from the sweep's start to its end.

Two sweeps given the same ``hydra.sweep.dir`` would write the same job folders (``0/``, ``1/``, ...) and each would
report the other's jobs as its own. The sweep that starts first takes an exclusive ``flock`` on :data:`LOCK_FILE`;
a second is refused (:class:`SweepFolderBusy`) while the first holds it. The kernel drops the lock when the holding
process ends, however it ends, so a lock left by a killed sweep blocks nothing. The file stays in the folder (deleting
a lock file races with a sweep opening it); it holds the holder's process id, host and start time, for the message.
A filesystem that takes no locks (some NFS mounts) cannot guard the folder: the sweep runs, and a notice says so.
POSIX only (``fcntl``), as the rest of gpubench's process handling.
"""

import errno
import fcntl
import os
import socket
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from gpubench.output import console

#: The lock file, in the sweep folder.
LOCK_FILE = ".gpubench_sweep.lock"
#: What ``flock`` fails with on a filesystem that does not lock.
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)


class SweepFolderBusy(Exception):
    """Another live sweep holds the folder's lock; the message is the one paragraph to show."""


def busy_message(sweep_dir: Path, holder: str) -> str:
    """The refusal of a sweep into ``sweep_dir``, whose lock ``holder`` (the lock file's text) holds."""
    who = f" ({holder})" if holder else ""
    return (
        f"another gpubench sweep{who} is writing the sweep folder {sweep_dir}: two sweeps in one folder overwrite "
        "each other's job folders and summaries, so this one does not start. Give it a folder of its own "
        "(hydra.sweep.dir=<folder>), or wait for that sweep to end; to rerun the jobs it did not finish after it "
        "ends, add sweep.resume=true with the same folder."
    )


@dataclass
class SweepLock:
    """The held lock of one sweep folder; :meth:`release` gives it up (closing the file would too)."""

    sweep_dir: Path
    handle: IO[str]

    def release(self) -> None:
        if not self.handle.closed:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()

    @classmethod
    def acquire(cls, sweep_dir: Path) -> "SweepLock":
        """Create ``sweep_dir`` if needed and lock it for this process. Raises :class:`SweepFolderBusy` when another
        process holds the lock, and OSError when the folder or the lock file cannot be created."""
        sweep_dir.mkdir(parents=True, exist_ok=True)
        # Append mode: opening must not erase the holder's line before the lock says who holds it.
        handle = (sweep_dir / LOCK_FILE).open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise SweepFolderBusy(busy_message(sweep_dir, holder)) from None
        except OSError:
            handle.close()
            raise
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()} on {socket.gethostname()}, started {started}\n")
        handle.flush()
        return cls(sweep_dir, handle)


def hold_sweep_folder(sweep_dir: Path) -> SweepLock | None:
    """This sweep's lock on ``sweep_dir``, held until :meth:`SweepLock.release` or the process's end. Another live
    sweep holding it is bad input: its paragraph, then exit 2, before anything is written. None where the folder
    cannot be created or written (the sweeper fails on it next, and the entry point names it), and where its
    filesystem takes no locks (a notice says the folder is unguarded)."""
    try:
        return SweepLock.acquire(sweep_dir)
    except SweepFolderBusy as exc:
        console.error(str(exc))
        # SystemExit passes Hydra's guard around callbacks.
        sys.exit(2)
    except OSError as exc:
        if exc.errno in _NO_LOCKS:
            console.notice(
                f"the filesystem of the sweep folder {sweep_dir} takes no file locks ({exc.strerror}): nothing stops "
                "another sweep given the same folder from overwriting this one's job folders."
            )
        return None
