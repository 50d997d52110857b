"""Local backend: FTP servers as child processes on 127.0.0.1.

Each :meth:`LocalBackend.start` creates a fresh run dir (``tempfile.mkdtemp`` under
``XFERLAB_RUN_DIR``, default the system temporary folder, or with the variant
``storage: tmpfs`` under ``XFERLAB_TMPFS_DIR``, default ``/dev/shm``; the filesystem
type found is recorded as ``build_info["storage_fs"]``)::

    <run>/home/     the FTP user's home (Target.root): fixtures go here
    <run>/logs/     server.log (stdout+stderr) and the server's own log files
    <run>/<config>  the rendered config (vsftpd.conf, proftpd.conf, config.json, ...)

The server runs in its own session/process group (``start_new_session``) with
RLIMIT_NOFILE raised (soft = hard; as root the hard limit is raised to
``min(fs.nr_open, 1048576)`` where the kernel allows it; the limit in force is in
``build_info["rlimit_nofile"]`` as [soft, hard]), optionally pinned to CPUs (``sched_setaffinity`` in the
child before exec, so forked per-client processes inherit it), and configured for
``ServerRequest.max_clients`` connections (seed 000: 2000). ``start`` returns once the
server answers the 220 greeting *and* accepts the USER/PASS login, else raises
ServerFailed with the tail of the server's logs.

Servers (see each ``_Recipe`` subclass): pyftpdlib, twisted (per-version venvs, see
:mod:`runner.backends.venvs`), vsftpd, proftpd, pureftpd (Debian binaries, installed or
extracted by :mod:`runner.backends.debs`), tpd (built from ``servers/tpd``), external.

``build_info["config_hash"]`` is the sha256 of the rendered config with the per-run
values (port, run dir, password) replaced by fixed placeholders, so two runs of the same
server/version/variant have the same hash.
"""
from __future__ import annotations

import hashlib
import json
import os
import pwd
import resource
import secrets
import shutil
import signal
import string
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil

from . import debs, variants
from .base import ServerFailed, ServerRequest, ServerSkipped, Target
from .probe import ProbeError, probe_once, wait_ready
from .venvs import FileLock, cache_dir, ensure_venv

Progress = Callable[[str], None]

#: Folder holding servers/<name>/ recipes (templates, launch scripts). Overridable
#: with XFERLAB_SERVERS_DIR (e.g. for an installed, non-editable copy).
SERVERS_DIR = Path(os.environ.get("XFERLAB_SERVERS_DIR")
                   or Path(__file__).resolve().parents[2] / "servers")

#: Server names this backend knows (``external`` needs ServerRequest.external).
KNOWN_SERVERS = ("pyftpdlib", "twisted", "vsftpd", "proftpd", "pureftpd", "tpd", "external")

#: The system account vsftpd logs in as (vsftpd only serves real accounts). Created
#: once by xferlab when running as root, with this password; its GECOS marks it as ours.
VSFTPD_USER = "xferlab-ftp"
VSFTPD_PASSWORD = "xferlab-ftp-pw"
VSFTPD_GECOS = "xferlab FTP benchmark user"

FTP_USER = "xferlab"
HOST = "127.0.0.1"
NOBODY_UID = 65534
NOGROUP_GID = 65534


# --------------------------------------------------------------------------- helpers

def free_port(host: str = HOST) -> int:
    """A TCP port free on ``host`` right now (bind to port 0 and release). Racy by nature;
    start() retries once with another port if the server reports it in use."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _pasv_range(variant: dict[str, Any]) -> tuple[int, int] | None:
    v = variant.get("pasv_ports")
    if not v:
        return None
    try:
        return variants.parse_port_range(v)
    except ValueError as e:
        raise ServerSkipped(f"invalid pasv_ports: {e}") from None


def _nr_open() -> int:
    try:
        return int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        return 1048576


def _make_preexec(cpu: list[int] | None) -> Callable[[], None]:
    hard_target = min(_nr_open(), 1048576)
    is_root = os.geteuid() == 0
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def preexec() -> None:  # runs in the child between fork and exec
        # PR_SET_PDEATHSIG (prctl(2), option 1): the server gets SIGKILL when the runner
        # dies, so a killed campaign leaves no orphaned server behind.
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if is_root and hard != resource.RLIM_INFINITY and hard < hard_target:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard_target, hard_target))
                soft = hard = hard_target
            except (ValueError, OSError):
                pass
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
        if cpu:
            os.sched_setaffinity(0, cpu)

    return preexec


def _log_tail(logs: Path, max_bytes: int = 3000) -> str:
    parts = []
    for f in sorted(logs.glob("*")):
        try:
            data = f.read_bytes()[-max_bytes:].decode("utf-8", "replace").strip()
        except OSError:
            continue
        if data:
            parts.append(f"--- {f.name} (tail) ---\n{data}")
    return "\n".join(parts) if parts else "(server logs are empty)"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _render(template: Path, values: dict[str, Any]) -> str:
    """Fill ``${name}`` placeholders of ``template`` (string.Template); KeyError names a missing one."""
    return string.Template(template.read_text()).substitute({k: str(v) for k, v in values.items()})


def _crypt_sha512(password: str) -> str:
    """A crypt(3) SHA-512 hash (``$6$...``) for passwd-style files: Python's ``crypt``
    where present (<= 3.12), else ``openssl passwd -6``."""
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


def _tree_pids(pid: int) -> list[psutil.Process]:
    try:
        p = psutil.Process(pid)
        return [p, *p.children(recursive=True)]
    except psutil.Error:
        return []


# --------------------------------------------------------------------------- run dir / launch

@dataclass
class RunDir:
    """Per-start scratch folder: ``path``, ``home`` (FTP root), ``logs``; ``storage``
    (``disk`` or ``tmpfs``) and ``fs_type`` (the filesystem it is on, e.g. ``ext4``)."""

    path: Path
    home: Path
    logs: Path
    storage: str = "disk"
    fs_type: str = ""

    @classmethod
    def create(cls, name: str, storage: str = "disk") -> "RunDir":
        """Make the folder on ``storage``.

        Raises:
            ServerSkipped: the configured folder is missing, or is not on the kind of
                filesystem asked for (``disk`` on a tmpfs, ``tmpfs`` on a disk).
        """
        from runner.config import get_settings

        settings = get_settings()
        base = settings.tmpfs_dir if storage == "tmpfs" else (settings.run_dir or Path(tempfile.gettempdir()))
        var = "XFERLAB_TMPFS_DIR" if storage == "tmpfs" else "XFERLAB_RUN_DIR"
        if not base.is_dir():
            raise ServerSkipped(f"storage={storage}: {base} is not a folder (set {var})")
        fs = filesystem_type(base)
        in_memory = fs in ("tmpfs", "ramfs")
        if (storage == "tmpfs") != in_memory:
            raise ServerSkipped(f"storage={storage}: {base} is on {fs or 'an unknown filesystem'}; "
                                f"set {var} to a folder on {'a tmpfs' if storage == 'tmpfs' else 'a disk'}")
        p = Path(tempfile.mkdtemp(prefix=f"xferlab-{name}-", dir=base))
        os.chmod(p, 0o755)  # servers that switch uid must traverse it
        (p / "home").mkdir()
        (p / "logs").mkdir()
        return cls(p, p / "home", p / "logs", storage, fs)


def filesystem_type(path: Path) -> str:
    """Filesystem type of the mount holding ``path`` (``"ext4"``, ``"tmpfs"``...),
    from the longest matching mount point in psutil's partition list; ``""`` if none."""
    real = os.path.realpath(path)
    best, fs = "", ""
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
            best, fs = mp, part.fstype
    return fs


@dataclass
class Launch:
    """What a recipe tells the backend to run.

    Attributes:
        argv: command line (argv[0] absolute).
        target: where to connect once ready.
        config_text: the rendered config (written by the recipe) for the hash, with
            per-run values normalised (see module docstring).
        info: build_info entries (version, binary, interpreter, obtained, ...).
        env: extra environment variables.
        ready_timeout: seconds to wait for the login probe.
    """

    argv: list[str]
    target: Target
    config_text: str
    info: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    ready_timeout: float = 20.0


class _Recipe:
    """How to check, prepare and launch one server kind."""

    name = "?"

    def __init__(self, backend: "LocalBackend"):
        self.backend = backend

    def quick_check(self) -> str | None:
        """Cheap availability check (no download/build): None or a skip reason."""
        return None

    def check(self, req: ServerRequest) -> None:
        """Raise ServerSkipped if ``req`` cannot run; may download/build (cached)."""

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        raise NotImplementedError


# --- pyftpdlib / twisted ----------------------------------------------------------

class _PyRecipe(_Recipe):
    package = "?"

    def quick_check(self) -> str | None:
        try:
            import venv  # noqa: F401
        except ImportError:
            return f"{self.name}: this Python has no venv module (apt-get install python3-venv)"
        script = SERVERS_DIR / self.name / "serve.py"
        if not script.is_file():
            return f"{self.name}: launch script {script} missing"
        return None

    def check(self, req: ServerRequest) -> None:
        reason = self.quick_check()
        if reason:
            raise ServerSkipped(reason)
        self.venv(req)

    def venv(self, req: ServerRequest):
        try:
            return ensure_venv(self.package, req.version, progress=self.backend.progress)
        except TimeoutError as e:
            raise ServerSkipped(f"{self.name} {req.version or 'latest'}: {e}") from e


class _PyftpdlibRecipe(_PyRecipe):
    """pyftpdlib via ``servers/pyftpdlib/serve.py``. Variant keys: ``use_sendfile``
    (bool, default True), ``pasv_ports`` ("LO-HI"), ``masquerade_address``, ``backlog``."""

    name = package = "pyftpdlib"

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        v = self.venv(req)
        script = SERVERS_DIR / "pyftpdlib" / "serve.py"
        password = secrets.token_hex(8)
        var = req.variant
        opts: list[str] = []
        if not var.get("use_sendfile", True):
            opts.append("--no-sendfile")
        pr = _pasv_range(var)
        if pr:
            opts += ["--pasv-ports", f"{pr[0]}-{pr[1]}"]
        if var.get("masquerade_address"):
            opts += ["--masquerade", str(var["masquerade_address"])]
        # max_cons = 0 (unlimited) as seed 000 patches in, unless a smaller limit is asked
        max_cons = 0 if req.max_clients >= 2000 else req.max_clients
        opts += ["--max-cons", str(max_cons), "--backlog", str(int(var.get("backlog", 1024)))]
        argv = [str(v.python), str(script), "--host", HOST, "--port", str(port),
                "--user", FTP_USER, "--password", password, "--home", str(run.home), *opts]
        cfg = {"script_sha256": _sha256(script.read_text()), "options": opts,
               "user": FTP_USER, "perm": "elradfmwMT"}
        (run.path / "config.json").write_text(json.dumps(cfg, indent=1))
        return Launch(argv, Target(HOST, port, FTP_USER, password, run.home),
                      json.dumps(cfg, sort_keys=True),
                      {"version": v.version, "binary": str(script), "interpreter": str(v.python),
                       "obtained": f"pip venv {v.path}" + (" (created now)" if v.created else " (cached)"),
                       "use_sendfile": bool(var.get("use_sendfile", True))},
                      env={"PYTHONUNBUFFERED": "1"})


class _TwistedRecipe(_PyRecipe):
    """Twisted's FTP server via ``servers/twisted/serve.py`` (seed 000's script).
    Variant keys: ``backlog``, ``pasv_ports``, ``masquerade_address``."""

    name = "twisted"
    package = "twisted"

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        v = self.venv(req)
        script = SERVERS_DIR / "twisted" / "serve.py"
        password = secrets.token_hex(8)
        pass_file = run.path / "pass.dat"
        pass_file.write_text(f"{FTP_USER}:{password}\n")
        backlog = int(req.variant.get("backlog", 1024))
        opts = ["--backlog", str(backlog)]
        pr = _pasv_range(req.variant)
        if pr:
            opts += ["--pasv-ports", f"{pr[0]}-{pr[1]}"]
        if req.variant.get("masquerade_address"):
            opts += ["--masquerade", str(req.variant["masquerade_address"])]
        argv = [str(v.python), str(script), "--host", HOST, "--port", str(port),
                "--passwd-file", str(pass_file), "--home", str(run.home), *opts]
        cfg = {"script_sha256": _sha256(script.read_text()), "options": opts, "user": FTP_USER}
        (run.path / "config.json").write_text(json.dumps(cfg, indent=1))
        return Launch(argv, Target(HOST, port, FTP_USER, password, run.home),
                      json.dumps(cfg, sort_keys=True),
                      {"version": v.version, "binary": str(script), "interpreter": str(v.python),
                       "obtained": f"pip venv {v.path}" + (" (created now)" if v.created else " (cached)")},
                      env={"PYTHONUNBUFFERED": "1"})


# --- Debian-packaged servers -----------------------------------------------------

class _DebRecipe(_Recipe):
    binary_name = "?"

    def found(self) -> debs.FoundBinary | None:
        return debs.find_server_binary(self.name)

    def quick_check(self) -> str | None:
        fb = self.found()
        if fb is None:
            spec = debs.DEB_SERVERS[self.name]
            return (f"{self.name}: {spec.binary} not in PATH, /usr/sbin or xferlab's cache "
                    f"({debs.debs_dir(self.name)}); it is fetched on first use with "
                    f"runner.backends.debs.fetch_debian_server({self.name!r}) "
                    f"(apt-get download {' '.join(spec.packages)} + dpkg -x; no install)")
        return self._libs_reason(fb)

    def _libs_reason(self, fb: debs.FoundBinary) -> str | None:
        miss = debs.missing_libs(fb.path)
        if miss:
            pkgs = debs.lib_packages(self.name) if fb.obtained != "system" else []
            hint = f"apt-get install {' '.join(pkgs)}" if pkgs else "install the packages providing them"
            return f"{self.name}: {fb.path} cannot run, missing shared libraries {', '.join(miss)}; {hint}"
        return None

    def check(self, req: ServerRequest) -> None:
        if req.version is not None:
            fb = self.found()
            have = fb.package_version if fb else None
            if have is None or not have.startswith(req.version):
                raise ServerSkipped(f"{self.name}: version {req.version} requested; only the Debian "
                                    f"package's ({have or 'none found'}) can run here")
        fb = self.found()
        if fb is None:
            if not self.backend.auto_fetch:
                raise ServerSkipped(self.quick_check() or f"{self.name}: not found")
            self.backend.progress(f"fetching {self.name} (apt-get download + dpkg -x into the cache)")
            debs.fetch_debian_server(self.name)
            fb = self.found()
            if fb is None:
                raise ServerSkipped(f"{self.name}: fetch reported success but no binary found")
        reason = self._libs_reason(fb)
        if reason:
            raise ServerSkipped(reason)
        self.extra_check(fb)

    def extra_check(self, fb: debs.FoundBinary) -> None:
        """Server-specific requirements (users, helper tools)."""

    def info(self, fb: debs.FoundBinary) -> dict[str, Any]:
        return {"version": fb.package_version, "binary": str(fb.path), "interpreter": None,
                "obtained": fb.obtained + (f" ({fb.root})" if fb.root else "")}

    def _binary(self) -> debs.FoundBinary:
        fb = self.found()
        if fb is None:
            raise ServerSkipped(self.quick_check() or f"{self.name}: not found")
        return fb


def _ensure_vsftpd_user() -> pwd.struct_passwd:
    """Create (once) the system user vsftpd serves (home "/", shell nologin, GECOS
    VSFTPD_GECOS), and (re)set its known password VSFTPD_PASSWORD (SHA-512 crypt).
    Raises ServerSkipped when not root or when a same-named account is not ours."""
    try:
        pw = pwd.getpwnam(VSFTPD_USER)
    except KeyError:
        pw = None
    if os.geteuid() != 0:
        raise ServerSkipped(f"vsftpd: needs root (it serves real system accounts and switches "
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


class _VsftpdRecipe(_DebRecipe):
    """vsftpd (Debian) in the foreground, from ``servers/vsftpd/vsftpd.conf.tmpl``.
    Logs in as system user ``xferlab-ftp`` (created when root). PAM service
    ``xferlab-vsftpd`` has no file in /etc/pam.d, so PAM applies Debian's ``other``
    policy (common-auth: pam_unix). Variant keys: ``use_sendfile`` (default True),
    ``pasv_ports``, ``masquerade_address``."""

    name = "vsftpd"

    def extra_check(self, fb: debs.FoundBinary) -> None:
        _ensure_vsftpd_user()

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        fb = self._binary()
        pw = _ensure_vsftpd_user()
        os.chown(run.home, pw.pw_uid, pw.pw_gid)
        empty = run.path / "empty"
        empty.mkdir(mode=0o755)
        pr = _pasv_range(req.variant) or (0, 0)  # 0 = any port
        masq = req.variant.get("masquerade_address")
        vals = {"host": HOST, "port": port, "home": run.home, "max_clients": req.max_clients,
                "pasv_min": pr[0], "pasv_max": pr[1],
                "pasv_address_line": f"pasv_address={masq}" if masq else "",
                "use_sendfile": "YES" if req.variant.get("use_sendfile", True) else "NO",
                "pam_service": "xferlab-vsftpd", "empty_dir": empty, "log_dir": run.logs}
        tmpl = SERVERS_DIR / "vsftpd" / "vsftpd.conf.tmpl"
        conf = run.path / "vsftpd.conf"
        conf.write_text(_render(tmpl, vals))
        norm = _render(tmpl, {**vals, "port": "PORT", "home": "RUN/home", "empty_dir": "RUN/empty",
                              "log_dir": "RUN/logs"})
        return Launch([str(fb.path), str(conf)],
                      Target(HOST, port, VSFTPD_USER, VSFTPD_PASSWORD, run.home), norm,
                      {**self.info(fb), "system_user": VSFTPD_USER, "password_hash": "sha512-crypt"})


class _ProftpdRecipe(_DebRecipe):
    """proftpd (Debian proftpd-core) with ``-n`` (foreground), from
    ``servers/proftpd/proftpd.conf.tmpl``. The FTP user lives in a generated
    AuthUserFile (mod_auth_file, uid/gid of nobody/nogroup when root, else ours), so no
    system account is needed. Variant keys: ``use_sendfile``, ``pasv_ports``,
    ``masquerade_address``."""

    name = "proftpd"

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        fb = self._binary()
        root = os.geteuid() == 0
        uid, gid = (NOBODY_UID, NOGROUP_GID) if root else (os.getuid(), os.getgid())
        run_user = pwd.getpwuid(uid).pw_name if root else pwd.getpwuid(os.getuid()).pw_name
        import grp
        run_group = grp.getgrgid(gid).gr_name
        os.chown(run.home, uid, gid)
        password = secrets.token_hex(8)
        (run.path / "ftpd.passwd").write_text(
            f"{FTP_USER}:{_crypt_sha512(password)}:{uid}:{gid}:xferlab:{run.home}:/bin/sh\n")
        (run.path / "ftpd.group").write_text(f"{run_group}:x:{gid}:{FTP_USER}\n")
        for f in ("ftpd.passwd", "ftpd.group"):
            os.chmod(run.path / f, 0o600)  # proftpd refuses world-readable AuthUserFile
        pr = _pasv_range(req.variant)
        masq = req.variant.get("masquerade_address")
        vals = {"host": HOST, "port": port, "max_clients": req.max_clients,
                "run_user": run_user, "run_group": run_group, "run_dir": run.path, "log_dir": run.logs,
                "use_sendfile": "on" if req.variant.get("use_sendfile", True) else "off",
                "passive_ports_line": f"PassivePorts {pr[0]} {pr[1]}" if pr else "",
                "masquerade_line": f"MasqueradeAddress {masq}" if masq else ""}
        tmpl = SERVERS_DIR / "proftpd" / "proftpd.conf.tmpl"
        conf = run.path / "proftpd.conf"
        conf.write_text(_render(tmpl, vals))
        norm = _render(tmpl, {**vals, "port": "PORT", "run_dir": "RUN", "log_dir": "RUN/logs"})
        argv = [str(fb.path), "-n", "-c", str(conf)]
        return Launch(argv, Target(HOST, port, FTP_USER, password, run.home), norm,
                      {**self.info(fb), "password_hash": "sha512-crypt"})


class _PureftpdRecipe(_DebRecipe):
    """pure-ftpd (Debian) in the foreground with a PureDB virtual user (made with
    ``pure-pw``), options from ``servers/pureftpd/args.tmpl``: ``-c``/``-C`` connection
    limits (max_clients), ``-l puredb:FILE``, ``-E`` (no anonymous), ``-H`` (no DNS).
    Variant keys: ``pasv_ports``, ``masquerade_address``."""

    name = "pureftpd"

    def extra_check(self, fb: debs.FoundBinary) -> None:
        if debs.find_tool(self.name, "pure-pw") is None:
            raise ServerSkipped("pureftpd: pure-pw not found next to pure-ftpd (needed for the PureDB user)")

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        fb = self._binary()
        pure_pw = debs.find_tool(self.name, "pure-pw")
        if pure_pw is None:
            raise ServerSkipped("pureftpd: pure-pw not found")
        root = os.geteuid() == 0
        uid, gid = (NOBODY_UID, NOGROUP_GID) if root else (os.getuid(), os.getgid())
        os.chown(run.home, uid, gid)
        password = secrets.token_hex(8)
        pwfile, pdb = run.path / "pureftpd.passwd", run.path / "pureftpd.pdb"
        # Written by hand rather than with `pure-pw useradd`, whose default argon2id hash
        # (t=1023) costs ~5 s of CPU per login here and would dominate login benchmarks.
        # SHA-512 crypt, like the proftpd and vsftpd users. No "/./": no chroot, like the others.
        pwfile.write_text(f"{FTP_USER}:{_crypt_sha512(password)}:{uid}:{gid}::{run.home}::::::::::::\n")
        os.chmod(pwfile, 0o600)
        r = subprocess.run([str(pure_pw), "mkdb", str(pdb), "-f", str(pwfile)],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or not pdb.exists():
            raise ServerFailed(f"pureftpd: pure-pw mkdb failed: {(r.stderr + r.stdout).strip()[-800:]}")
        pr = _pasv_range(req.variant)
        masq = req.variant.get("masquerade_address")
        vals = {"host": HOST, "port": port, "max_clients": req.max_clients, "puredb": pdb,
                "pasv_opt": f"-p {pr[0]}:{pr[1]}" if pr else "",
                "masq_opt": f"-P {masq}" if masq else ""}
        tmpl = SERVERS_DIR / "pureftpd" / "args.tmpl"
        rendered = _render(tmpl, vals)
        argv = [str(fb.path)] + [a for ln in rendered.splitlines()
                                 if ln.strip() and not ln.lstrip().startswith("#") for a in ln.split()]
        (run.path / "pureftpd.args").write_text(" ".join(argv) + "\n")
        norm = _render(tmpl, {**vals, "port": "PORT", "puredb": "RUN/pureftpd.pdb"})
        info = {**self.info(fb), "password_hash": "sha512-crypt"}
        return Launch(argv, Target(HOST, port, FTP_USER, password, run.home), norm, info)


# --- tpd ---------------------------------------------------------------------------

def _tpd_source_hash(src: Path) -> str:
    """16 hex chars of sha256 over servers/tpd's sources (*.c, *.h, *.mk, *.in, Makefile):
    the build cache key."""
    h = hashlib.sha256()
    for f in sorted(src.rglob("*")):
        if f.is_file() and (f.suffix in {".c", ".h", ".mk", ".in"} or f.name in {"Makefile", "GNUmakefile"}):
            h.update(str(f.relative_to(src)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


class _TpdRecipe(_Recipe):
    """xferlab's C server, built with ``make -C servers/tpd OUT=<cache>/tpd/<srchash>``
    (rebuilt when the sources' hash changes). Serves FTP and HTTP (Target.http_port).
    Variant keys: ``use_sendfile`` (default True), ``pasv_ports`` (default a 2000-port
    window derived from the FTP port), ``idle_timeout`` (s, default 300)."""

    name = "tpd"

    @property
    def src(self) -> Path:
        return SERVERS_DIR / "tpd"

    def quick_check(self) -> str | None:
        if not (self.src / "Makefile").is_file():
            return f"tpd: {self.src / 'Makefile'} not found (the C server is not in this checkout yet)"
        if not shutil.which("make") or not (shutil.which("cc") or shutil.which("gcc")):
            return "tpd: make/cc not found; apt-get install build-essential"
        return None

    def out_dir(self) -> Path:
        return cache_dir() / "tpd" / _tpd_source_hash(self.src)

    def check(self, req: ServerRequest) -> None:
        reason = self.quick_check()
        if reason:
            raise ServerSkipped(reason)
        self.build()

    def build(self) -> Path:
        out = self.out_dir()
        binary = out / "tpd"
        if binary.is_file() and (out / ".built").exists():
            return binary
        out.mkdir(parents=True, exist_ok=True)
        with FileLock(out.parent / f"{out.name}.lock", timeout=600):
            if binary.is_file() and (out / ".built").exists():
                return binary
            self.backend.progress(f"building tpd into {out}")
            try:
                r = subprocess.run(["make", "-C", str(self.src), f"OUT={out}"],
                                   capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired as e:
                raise ServerSkipped("tpd: build timed out after 600 s") from e
            if r.returncode != 0 or not binary.is_file():
                tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
                raise ServerSkipped(f"tpd: build failed (make -C {self.src} OUT={out}, "
                                    f"exit {r.returncode}):\n{tail}")
            (out / ".built").write_text(str(time.time()))
        return binary

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        binary = self.build()
        http_port = free_port()
        password = secrets.token_hex(8)
        users = run.path / "users"
        users.write_text(f"{FTP_USER}:{{plain}}{password}:{run.home}:rw\n")
        os.chmod(users, 0o600)
        pr = _pasv_range(req.variant)
        if pr is None:  # a window away from the kernel's ephemeral range (32768-60999)
            lo = 10000 + (port * 7919) % 20 * 1000
            pr = (lo, lo + 1999)
        idle = int(req.variant.get("idle_timeout", 300))
        opts = ["--pasv-ports", f"{pr[0]}-{pr[1]}", "--max-conns", str(req.max_clients),
                "--idle-timeout", str(idle), "--log-level", "warn"]
        if not req.variant.get("use_sendfile", True):
            opts.append("--no-sendfile")
        argv = [str(binary), "--ftp-listen", f"{HOST}:{port}", "--http-listen", f"{HOST}:{http_port}",
                "--users", str(users), *opts]
        norm = json.dumps({"options": [o for o in opts if not o[0].isdigit()] + [
            f"pasv_width={pr[1] - pr[0] + 1}"], "binary_src": self.out_dir().name}, sort_keys=True)
        return Launch(argv, Target(HOST, port, FTP_USER, password, run.home, http_port=http_port), norm,
                      {"version": f"src-{self.out_dir().name}", "binary": str(binary), "interpreter": None,
                       "obtained": f"built from {self.src}"})


# --------------------------------------------------------------------------- handles

class LocalServerHandle:
    """A server started by :class:`LocalBackend` (implements base.ServerHandle).

    Attributes:
        target: where to connect.
        pid: root pid of the server's process tree (its own process group).
        build_info: name, version, variant, binary, interpreter, config_hash, obtained,
            run_dir, argv, startup_s, greeting, cpu.
        run_dir: the run dir (removed by stop() unless the backend keeps run dirs).
    """

    def __init__(self, proc: subprocess.Popen, target: Target, build_info: dict[str, Any],
                 run: RunDir, keep_run_dir: bool, stop_timeout: float):
        self._proc = proc
        self.target = target
        self.pid: int | None = proc.pid
        self.build_info = build_info
        self.run_dir = run.path
        self._run = run
        self._keep = keep_run_dir
        self._stop_timeout = stop_timeout
        self._stopped = False

    def alive(self) -> bool:
        """True while the root server process has not exited."""
        return not self._stopped and self._proc.poll() is None

    def log_tail(self) -> str:
        """Tail of the server's log files (for error messages)."""
        return _log_tail(self._run.logs)

    def stop(self) -> None:
        """SIGTERM the process group and every descendant, wait up to ``stop_timeout``
        seconds, then SIGKILL what is left; reap the root; remove the run dir (unless
        kept). Idempotent; never raises for an already-dead server."""
        if self._stopped:
            return
        self._stopped = True
        procs = _tree_pids(self._proc.pid)  # descendants that left our process group too
        pgid = self._proc.pid  # start_new_session: pgid == pid
        for sig, wait in ((signal.SIGTERM, self._stop_timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            for p in procs:
                try:
                    p.send_signal(sig)
                except psutil.Error:
                    pass
            try:
                self._proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            _, left = psutil.wait_procs([p for p in procs if p.pid != self._proc.pid], timeout=wait)
            if not left:
                break
            procs = left
        try:
            self._proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        if not self._keep:
            shutil.rmtree(self._run.path, ignore_errors=True)

    def __enter__(self) -> "LocalServerHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ExternalHandle:
    """A server xferlab did not start (``ServerRequest.external``). ``stop()`` does
    nothing; ``pid`` is the given pid (memory is sampled from it) or None."""

    def __init__(self, target: Target, pid: int | None, build_info: dict[str, Any]):
        self.target = target
        self.pid = pid
        self.build_info = build_info

    def alive(self) -> bool:
        """pid given: whether it exists; else whether the FTP port answers a login."""
        if self.pid is not None:
            return psutil.pid_exists(self.pid)
        try:
            probe_once(self.target.host, self.target.port, self.target.user, self.target.password)
            return True
        except Exception:
            return False

    def stop(self) -> None:
        """No-op: xferlab does not own external servers."""


# --------------------------------------------------------------------------- backend

class LocalBackend:
    """Runs servers as local child processes (see module docstring).

    Args:
        progress: called with one-line progress messages (venv creation, downloads, builds).
        auto_fetch: fetch missing vsftpd/proftpd/pure-ftpd binaries into the cache on check().
        keep_run_dirs: leave run dirs (logs, configs, files) after stop().
        ready_timeout: seconds to wait for greeting+login (None: the recipe's default, 20 s).
        stop_timeout: seconds between SIGTERM and SIGKILL in stop().
    """

    name = "local"

    def __init__(self, *, progress: Progress | None = None, auto_fetch: bool = True,
                 keep_run_dirs: bool = False, ready_timeout: float | None = None,
                 stop_timeout: float = 5.0):
        self.progress: Progress = progress or (lambda _m: None)
        self.auto_fetch = auto_fetch
        self.keep_run_dirs = keep_run_dirs
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self._recipes: dict[str, _Recipe] = {r.name: r for r in (
            _PyftpdlibRecipe(self), _TwistedRecipe(self), _VsftpdRecipe(self), _ProftpdRecipe(self),
            _PureftpdRecipe(self), _TpdRecipe(self))}

    def _recipe(self, req: ServerRequest) -> _Recipe:
        r = self._recipes.get(req.name)
        if r is None:
            raise ServerSkipped(f"unknown server {req.name!r}; known: {', '.join(KNOWN_SERVERS)}")
        return r

    def check(self, req: ServerRequest) -> None:
        """Raise ServerSkipped with the reason when ``req`` cannot run here. May create a
        venv, fetch a Debian package or build tpd (all cached). For ``external``: raises
        ServerSkipped if host/port are missing or it does not answer a login."""
        if req.name == "external":
            self._external_target(req)
            ext = req.external
            try:
                probe_once(ext["host"], int(ext["port"]), ext.get("user", "anonymous"),
                           ext.get("password", ""), timeout=5)
            except Exception as e:
                raise ServerSkipped(f"external {ext['host']}:{ext['port']}: no FTP login: {e}") from e
            return
        recipe = self._recipe(req)
        self.check_variant(req)
        recipe.check(req)

    @staticmethod
    def check_variant(req: ServerRequest) -> None:
        """Raise ServerSkipped when ``req.variant`` has a key this backend cannot apply
        (docker-only keys such as ``memory``, ``network``; see runner.backends.variants)."""
        reason = variants.backend_problem(req.name, req.variant, "local")
        if reason:
            raise ServerSkipped(reason)

    @staticmethod
    def _external_target(req: ServerRequest) -> Target:
        ext = req.external
        if not ext or "host" not in ext or "port" not in ext:
            raise ServerSkipped("external: ServerRequest.external needs at least host and port")
        return Target(str(ext["host"]), int(ext["port"]), str(ext.get("user", "anonymous")),
                      str(ext.get("password", "")), Path(ext["root"]) if ext.get("root") else None,
                      int(ext["http_port"]) if ext.get("http_port") else None)

    def start(self, req: ServerRequest, *, cpu: list[int] | None = None) -> LocalServerHandle | ExternalHandle:
        """Start ``req`` (pinned to ``cpu`` if given) and wait for greeting + login.

        Returns:
            LocalServerHandle (ExternalHandle for ``external``).

        Raises:
            ServerSkipped: cannot run here (see check()).
            ServerFailed: started but did not answer in time or exited; message has the
                log tail.
        """
        if req.name == "external":
            target = self._external_target(req)
            try:
                greeting, _ = wait_ready(target.host, target.port, target.user, target.password,
                                         timeout=self.ready_timeout or 10)
            except ProbeError as e:
                raise ServerFailed(f"external {target.host}:{target.port}: {e}") from e
            pid = req.external.get("pid")
            info = {"name": "external", "version": req.version, "variant": dict(req.variant),
                    "binary": None, "interpreter": None, "config_hash": None,
                    "obtained": "external", "greeting": greeting, "pid": pid}
            return ExternalHandle(target, int(pid) if pid is not None else None, info)

        recipe = self._recipe(req)
        self.check_variant(req)
        recipe.check(req)
        last_err: Exception | None = None
        for attempt in range(2):  # second try only for a port grabbed between probe and bind
            handle = None
            run = RunDir.create(req.name, str(req.variant.get("storage", "disk")))
            try:
                port = free_port()
                launch = recipe.launch(req, run, port)
                handle = self._spawn(req, recipe, launch, run, cpu)
                return handle
            except ServerFailed as e:
                last_err = e
                if handle is not None:
                    handle.stop()
                if not self.keep_run_dirs:
                    shutil.rmtree(run.path, ignore_errors=True)
                if "in use" not in str(e).lower():
                    raise
            except BaseException:
                if not self.keep_run_dirs:
                    shutil.rmtree(run.path, ignore_errors=True)
                raise
        assert last_err is not None
        raise last_err

    def _spawn(self, req: ServerRequest, recipe: _Recipe, launch: Launch, run: RunDir,
               cpu: list[int] | None) -> LocalServerHandle:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(launch.env)
        log = open(run.logs / "server.log", "wb")
        try:
            proc = subprocess.Popen(launch.argv, cwd=run.path, env=env, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_make_preexec(cpu), close_fds=True)
        except OSError as e:
            raise ServerFailed(f"{req.label}: cannot execute {launch.argv[0]}: {e}") from e
        finally:
            log.close()
        info = {"name": req.name, "variant": dict(req.variant), "label": req.label,
                **launch.info, "config_hash": _sha256(launch.config_text),
                "run_dir": str(run.path), "argv": [a if a != launch.target.password else "***"
                                                   for a in launch.argv],
                "cpu": list(cpu) if cpu else None, "max_clients": req.max_clients,
                "requested_version": req.version, "storage": run.storage, "storage_fs": run.fs_type}
        handle = LocalServerHandle(proc, launch.target, info, run, self.keep_run_dirs, self.stop_timeout)
        t = launch.target
        try:
            greeting, waited = wait_ready(t.host, t.port, t.user, t.password,
                                          timeout=self.ready_timeout or launch.ready_timeout,
                                          alive=lambda: proc.poll() is None)
        except ProbeError as e:
            code = proc.poll()
            tail = _log_tail(run.logs)
            handle.stop()
            raise ServerFailed(f"{req.label}: {e}" + (f" (exit code {code})" if code is not None else "")
                               + f"\nargv: {' '.join(info['argv'])}\n{tail}") from e
        info["greeting"] = greeting
        info["startup_s"] = round(waited, 3)
        info["pid"] = proc.pid
        try:
            info["rlimit_nofile"] = list(psutil.Process(proc.pid).rlimit(psutil.RLIMIT_NOFILE))
        except psutil.Error:
            info["rlimit_nofile"] = None
        return handle


def available_servers(backend: LocalBackend | None = None) -> list[tuple[str, str | None]]:
    """Each known local server and None when it can run here, else the reason it is
    skipped, e.g. ``[("pyftpdlib", None), ("tpd", "tpd: .../Makefile not found ...")]``.
    Cheap: downloads and builds nothing (a server fetched/built on first use is reported
    with a reason saying so). ``external`` is not listed (it needs a spec)."""
    b = backend or LocalBackend(auto_fetch=False)
    out: list[tuple[str, str | None]] = []
    for name, r in b._recipes.items():
        try:
            out.append((name, r.quick_check()))
        except ServerSkipped as e:
            out.append((name, str(e)))
    return out
