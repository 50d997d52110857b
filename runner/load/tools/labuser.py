"""The unprivileged user the client tools run as.

The worker runs as root (network namespaces, tc), but the client tools it starts (lftp,
wget, curl through runner.load.tools.spawn' ``clientspawn``; wrk and h2load through
runner.load.tools.child.run_child) never do: when this process is root, every client
process drops to the lab user ``XFERLAB_CLIENT_USER`` (runner.config.Settings, default
``xferlab-client``, made by ``scripts/install.sh`` and the Ansible ``loadgen`` role)
after its namespace is joined and its stdout/stderr files are opened, and before exec:
no supplementary groups, then the user's group, then the user. A process that is not
root runs its clients as itself (a developer running the tests): no change of user.

What a client needs is made reachable to that user here: its own working folder
(:func:`give_folder`: owned by the user), the folder above it (:func:`open_folder`:
root-owned, searchable by the user's group only, not listable) and files it reads by
name (:func:`share_file`: the upload source, linked into such a folder). Nothing
else of root's is (the job list, the other clients' output files: mode 0600).
"""
from __future__ import annotations

import errno
import os
import pwd
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.load.base import DriverUnavailable

#: How to make the user, named in the error when it is missing.
INSTALL_HINT = ("make install (or, as root, bash scripts/install.sh; on lab hosts the Ansible loadgen role) "
                "creates it")


@dataclass(frozen=True)
class ClientUser:
    """The user client processes run as.

    Attributes:
        name: the user name (``XFERLAB_CLIENT_USER``).
        uid / gid: its user id and its primary group id (never 0).
    """

    name: str
    uid: int
    gid: int

    def popen_kwargs(self) -> dict[str, Any]:
        """``subprocess.Popen`` arguments that start the child as this user: ``user``,
        ``group`` and ``extra_groups=[]`` (no supplementary groups; Popen calls setgroups,
        setregid, setreuid in that order and raises if one fails)."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def client_user() -> ClientUser | None:
    """The user client processes must run as: None when this process is not root (they
    run as the current user), else the lab user ``XFERLAB_CLIENT_USER``, looked up in
    the user database.

    Raises:
        DriverUnavailable: this process is root and the user does not exist (the message
            names ``XFERLAB_CLIENT_USER`` and the install step), or it is root itself
            (uid or primary gid 0).
    """
    if os.geteuid() != 0:
        return None
    from runner.config import get_settings

    name = get_settings().client_user
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise DriverUnavailable(
            f"running as root, the client tools run as the unprivileged user XFERLAB_CLIENT_USER={name!r}, "
            f"which does not exist on this host; {INSTALL_HINT}") from None
    if pw.pw_uid == 0 or pw.pw_gid == 0:
        raise DriverUnavailable(f"XFERLAB_CLIENT_USER={name!r} is uid {pw.pw_uid} / gid {pw.pw_gid}: the client "
                                f"tools must not run as root or in root's group; name an unprivileged user")
    return ClientUser(name, pw.pw_uid, pw.pw_gid)


def give_folder(path: Path, user: ClientUser | None) -> None:
    """Make ``path`` (a client's own working folder, e.g. where lftp writes
    ``xfer.log``) the user's: owned by it, mode 0700. Nothing when ``user`` is None.
    Raises OSError."""
    if user is None:
        return
    os.chown(path, user.uid, user.gid)
    os.chmod(path, 0o700)


def open_folder(path: Path, user: ClientUser | None) -> None:
    """Let the user reach entries of ``path`` by name but not list or change it: owner
    root, group the user's, mode 0710 (the files in it keep their own modes: the job
    list and output files are 0600). Nothing when ``user`` is None. Raises OSError."""
    if user is None:
        return
    os.chown(path, 0, user.gid)
    os.chmod(path, 0o710)


def share_file(src: Path, folder: Path, user: ClientUser | None) -> Path:
    """A path the user can read ``src`` at: ``src`` itself when ``user`` is None, else
    ``folder/<name>``, a hard link to ``src`` (a copy when ``src`` is on another file
    system), mode 0644, owned by root; ``folder`` must be reachable by the user
    (:func:`open_folder`). Used for the upload source, which lies in root's cache folder.
    Raises OSError."""
    if user is None:
        return src
    dest = folder / src.name
    try:
        os.link(src, dest)
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EPERM):  # another file system; links refused there
            raise
        shutil.copyfile(src, dest)
    os.chmod(dest, 0o644)
    return dest


def read_client_file(path: Path, limit: int = 1 << 20) -> str:
    """The last ``limit`` bytes (at most) of a file a client wrote in its own folder, as
    UTF-8 (bad bytes replaced), read without following a symbolic link and only when it
    is a regular file: the client's user owns that folder and could leave a link to a
    file of root's, or a FIFO that would block this process, in its place.

    Raises:
        OSError: missing, a symbolic link (ELOOP), or not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file")
        f.seek(max(0, st.st_size - limit))
        return f.read(limit).decode("utf-8", "replace")
