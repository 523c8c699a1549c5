"""What the server keeps from other users of its machine: its data directory is private to
the user running it, and a database password stays off every command line.

- The data directory holds every team's job specs and environment values (the SQLite store),
  pods' output, the admin token and the metrics. The server's processes run under umask 077,
  so everything they create is 0600 (directories 0700), and at start the directory, its files
  and the executor's runs are tightened to those modes (a directory made by an older topoq,
  or by hand, may be 0755 with 0644 files).
- ``/proc/<pid>/cmdline`` is readable by every local user: the database URL comes from
  ``TOPOQ_DATABASE_URL`` (or ``--database``, with a warning when it holds a password) and
  reaches the API processes through their environment, which only the same user can read.
  libpq's ``PGPASSWORD`` and ``PGPASSFILE`` work too, with a URL without a password.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from topoq.executors.local.layout import PRIVATE_DIRECTORY_MODE

log = logging.getLogger("topoq.server")

DATABASE_URL_ENV = "TOPOQ_DATABASE_URL"
PRIVATE_UMASK = 0o077
RUNS_DIRECTORY = "runs"
"""Where the local executor keeps pods' files, under the data directory."""


def keep_files_private() -> None:
    """Have every file and directory this process (and its children) creates be the user's
    alone."""
    os.umask(PRIVATE_UMASK)


def make_private(data_dir: Path, work_dirs: tuple[str, ...] = (RUNS_DIRECTORY,)) -> None:
    """Create ``data_dir`` (0700) if needed, and take group and other permissions off it, off
    the files in it and off everything under its ``work_dirs`` (the executor's runs: pods'
    output). Other directories in it are not topoq's and are left alone, as are symbolic
    links (never followed)."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIRECTORY_MODE)
    _tighten(data_dir)
    for entry in data_dir.iterdir():
        if entry.name in work_dirs and entry.is_dir() and not entry.is_symlink():
            _tighten_tree(entry)
        elif entry.is_file() and not entry.is_symlink():
            _tighten(entry)


def _tighten_tree(top: Path) -> None:
    _tighten(top)
    for root, directories, files in os.walk(top):
        for name in (*directories, *files):
            _tighten(Path(root) / name)


def _tighten(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):  # a pod's file may come and go meanwhile
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode) or not mode & 0o077:
            return
        try:
            path.chmod(stat.S_IMODE(mode) & ~0o077)
        except PermissionError:
            log.warning("cannot make %s private (it is not ours): other users may read it", path)


def database_url(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The database URL: ``--database`` if given, else ``TOPOQ_DATABASE_URL``, else None
    (SQLite in the data directory). Warns (without it) when the given one holds a password."""
    if given:
        if holds_password(given):
            log.warning(
                "the database password is on the command line, where every local user can "
                "read it; give the URL in %s, or the password in PGPASSFILE or PGPASSWORD",
                DATABASE_URL_ENV,
            )
        return given
    return environ.get(DATABASE_URL_ENV) or None


def holds_password(url: str) -> bool:
    try:
        return make_url(url.strip()).password is not None
    except ArgumentError:
        return False


def child_environment(url: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of an API process: the caller's, with the database URL (or without
    one, for the default SQLite store)."""
    environment = dict(environ)
    if url:
        environment[DATABASE_URL_ENV] = url
    else:
        environment.pop(DATABASE_URL_ENV, None)
    return environment
