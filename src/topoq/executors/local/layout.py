"""Where the local executor keeps an attempt's files, and how it writes them.

Every path comes from the job's team, id and attempt: ``<work_dir>/<team>/<job>/<attempt>/``.
Each name becomes one path component through ``path_component``, an injective escape, so two
different jobs never share a directory, whatever their ids: the API refuses ids outside the
DNS-1123 grammar, but the executor does not rely on it.

Everything is private to the executor's user, whatever the process umask: directories 0700,
files 0600.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from pathlib import Path

FILE_NAME_LIMIT_BYTES = 255
"""The longest file name Linux file systems take (``NAME_MAX``)."""
PRIVATE_DIRECTORY_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_KEPT_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-")
_LONGEST_ESCAPED = 160
"""Escaped names longer than this are shortened to a prefix and a hash (under the limit)."""
_PREFIX_OF_HASHED = 80
_EXECUTOR_ID_HEX_DIGITS = 32
_HASHED_MARK = "_h"
"""Never part of a plain escape (after ``_`` come two hex digits there), so a hashed name
never equals an escaped one."""


def path_component(name: str) -> str:
    """``name`` as one file name, injectively: ``a–z``, ``0–9`` and ``-`` are kept and every
    other byte of its UTF-8 form (``_`` and ``.`` included) becomes ``_xx`` (hex). So no name
    is hidden, ``.`` or ``..``, or holds a ``/``. The empty name is ``_``. A name whose escape
    is longer than 160 bytes becomes its first 80 escaped bytes, ``_h`` and its SHA-256."""
    data = name.encode("utf-8", errors="surrogatepass")
    escaped = "".join(chr(byte) if byte in _KEPT_BYTES else f"_{byte:02x}" for byte in data)
    if not escaped:
        return "_"
    if len(escaped) > _LONGEST_ESCAPED:
        digest = hashlib.sha256(data).hexdigest()
        return escaped[:_PREFIX_OF_HASHED] + _HASHED_MARK + digest
    return escaped


def team_dir(work_dir: Path, team: str) -> Path:
    return work_dir / path_component(team)


def job_dir(work_dir: Path, team: str, job: str) -> Path:
    return team_dir(work_dir, team) / path_component(job)


def attempt_dir(work_dir: Path, team: str, job: str, attempt: int) -> Path:
    return job_dir(work_dir, team, job) / str(attempt)


def pod_log(directory: Path, rank: int) -> Path:
    """The pod's stdout and stderr together."""
    return directory / f"pod-{rank}.log"


def pod_exit_file(directory: Path, rank: int) -> Path:
    """The exit code of the pod's command, written by its keeper when the command ended
    (``topoq.executors.local.pod_keeper``)."""
    return directory / f"pod-{rank}.exit"


def rotated_log(directory: Path, rank: int) -> Path:
    """The older part of the pod's output, once its log was rotated."""
    return directory / f"pod-{rank}.log.1"


def log_marks(directory: Path, rank: int) -> Path:
    """When the pod's output was written (``topoq.executors.local.log_marks``)."""
    return directory / f"pod-{rank}.marks"


def log_rotation(directory: Path, rank: int) -> Path:
    """How far the pod's log was rotated (``topoq.executors.local.log_rotation``)."""
    return directory / f"pod-{rank}.rotation"


def make_private_directories(directory: Path, root: Path) -> None:
    """Make ``directory`` and every missing directory between it and ``root`` (``root``
    included), each 0700. Directories that already exist keep their mode: the executor makes
    its ``work_dir`` private when it starts, and everything below is made here."""
    for path in [*reversed(directory.relative_to(root).parents), directory.relative_to(root)]:
        full = root / path
        try:
            full.mkdir(mode=PRIVATE_DIRECTORY_MODE, parents=True)
        except FileExistsError:
            if full.is_dir() and not full.is_symlink():
                continue
            raise
        full.chmod(PRIVATE_DIRECTORY_MODE)  # mkdir's mode is cut by the umask


def open_private(path: Path, flags: int) -> int:
    """A descriptor of ``path`` (created 0600 when new) opened with ``flags``; a file that
    exists is made 0600 too."""
    descriptor = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    os.fchmod(descriptor, PRIVATE_FILE_MODE)
    return descriptor


def write_private_text(path: Path, text: str) -> None:
    """Replace ``path``'s content with ``text``, the file 0600."""
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as file:
        file.write(text)


EXECUTOR_ID_FILE = "executor.id"
"""In ``work_dir``: the executor's id, the first part of every pod's ``TOPOQ_POD`` marker.
(No path component holds a ``.``, so no team's directory can take this name.)"""


def executor_id(work_dir: Path) -> str:
    """The id of the executor that runs pods in ``work_dir``, made on first use and kept, so
    an executor started after a crash recognises its predecessor's pods."""
    path = work_dir / EXECUTOR_ID_FILE
    with contextlib.suppress(OSError, UnicodeDecodeError):
        known = path.read_text(encoding="utf-8").strip()
        if len(known) == _EXECUTOR_ID_HEX_DIGITS and all(c in "0123456789abcdef" for c in known):
            return known
    made = secrets.token_hex(_EXECUTOR_ID_HEX_DIGITS // 2)
    write_private_text(path, made + "\n")
    return made


def attempt_marker(executor: str, team: str, job: str, attempt: int) -> str:
    """What every ``TOPOQ_POD`` marker of the attempt starts with (the rank follows)."""
    return f"{executor}/{path_component(team)}/{path_component(job)}/{attempt}/"
