"""Accounts the local servers run as or serve: the vsftpd system user, the
unprivileged uid/gid the others switch to, and passwd-style password hashes."""
from __future__ import annotations

import os
import pwd
import subprocess

from filelock import FileLock

from runner.backends.base import MachineLacks, ServerSkipped
from runner.backends.local.venvs import cache_dir

#: The system account vsftpd logs in as (vsftpd only serves real accounts). Created
#: once by xferlab when running as root, with this password; its GECOS marks it as ours.
VSFTPD_USER = "xferlab-ftp"
VSFTPD_PASSWORD = "xferlab-ftp-pw"
VSFTPD_GECOS = "xferlab FTP benchmark user"

NOBODY_UID = 65534
NOGROUP_GID = 65534


def service_ids() -> tuple[int, int]:
    """(uid, gid) a server's FTP user maps to: nobody/nogroup when running as root,
    else this process's own."""
    if os.geteuid() == 0:
        return NOBODY_UID, NOGROUP_GID
    return os.getuid(), os.getgid()


def crypt_sha512(password: str) -> str:
    """A crypt(3) SHA-512 hash (``$6$...``) for passwd-style files: Python's ``crypt``
    where present (<= 3.12), else ``openssl passwd -6``. Raises CalledProcessError when
    openssl fails."""
    try:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt  # type: ignore[import-not-found]
        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_SHA512))
    except ImportError:
        r = subprocess.run(["openssl", "passwd", "-6", "-stdin"], input=password,
                           capture_output=True, text=True, timeout=20, check=True)
        return r.stdout.strip()


def ensure_vsftpd_user() -> pwd.struct_passwd:
    """Create (once) the system user vsftpd serves (home "/", shell nologin, GECOS
    VSFTPD_GECOS), and (re)set its known password VSFTPD_PASSWORD (SHA-512 crypt).
    Raises MachineLacks when not root, ServerSkipped when a same-named account is not ours."""
    try:
        pw = pwd.getpwnam(VSFTPD_USER)
    except KeyError:
        pw = None
    if os.geteuid() != 0:
        raise MachineLacks(f"vsftpd: needs root (it serves real system accounts and switches "
                            f"uid per session); run as root or create user {VSFTPD_USER}")
    with FileLock(cache_dir() / "vsftpd-user.lock", timeout=60):
        if pw is None:
            r = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/",
                                "--shell", "/usr/sbin/nologin", "--comment", VSFTPD_GECOS, VSFTPD_USER],
                               capture_output=True, text=True, timeout=30)
            if r.returncode != 0 and "already exists" not in r.stderr:
                raise ServerSkipped(f"vsftpd: useradd {VSFTPD_USER} failed: {r.stderr.strip()}")
            pw = pwd.getpwnam(VSFTPD_USER)
        elif pw.pw_gecos.split(",")[0] != VSFTPD_GECOS:
            raise ServerSkipped(f"vsftpd: user {VSFTPD_USER} exists but was not created by xferlab "
                                f"(GECOS {pw.pw_gecos!r}); not touching it")
        if pw.pw_dir != "/":  # vsftpd chdirs to the home before applying local_root
            subprocess.run(["usermod", "--home", "/", VSFTPD_USER], capture_output=True, timeout=30)
            pw = pwd.getpwnam(VSFTPD_USER)
        # SHA-512 crypt (not Debian's default yescrypt) so login cost matches proftpd/pure-ftpd
        r = subprocess.run(["chpasswd", "-c", "SHA512"], input=f"{VSFTPD_USER}:{VSFTPD_PASSWORD}\n",
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise ServerSkipped(f"vsftpd: chpasswd for {VSFTPD_USER} failed: {r.stderr.strip()}")
    return pw
