"""One sweep per folder: two sweeps in one folder would write the same job folders and report each other's jobs.
The first takes an exclusive ``flock`` on :data:`LOCK_FILE`, which the kernel drops when its process ends however it
ends; the file stays (deleting it races with a sweep opening it) and names its holder. POSIX only (``fcntl``)."""

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
    """The refusal of a sweep into ``sweep_dir``, whose lock ``holder`` holds."""
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
        """Create ``sweep_dir`` if needed and lock it for this process; :class:`SweepFolderBusy` when another process
        holds the lock."""
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
    """This sweep's lock on ``sweep_dir``; another live sweep holding it is bad input (exit 2). None where the folder
    cannot be written (the sweeper fails on it next) or its filesystem takes no locks (a notice says so)."""
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
