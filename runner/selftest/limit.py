"""The loopback limit of a file download, measured by ``netlimit`` (``netlimit.c`` here).

One definition, used by ``benchmarks/tpd_targets.py`` and ``xferlab selftest``
(docs/methodology.md, "The loopback limit"): the limit is the throughput of the best
sender -> the best receiver on this machine, in the same run and with the same pinning
as the server being judged:

- sender: a C process serving the file with blocking ``sendfile(2)`` (zero-copy, tpd's
  RETR syscall), pinned to the server's CPU;
- receiver: a C process draining to EOF with ``recv(2)`` into one buffer (``"recv"``) or
  ``splice(2)`` to /dev/null (``"splice"``), pinned to the client's CPU, in every
  variant of :data:`VARIANTS`: with and without ``SO_RCVLOWAT`` (then it waits in
  ``poll(2)`` and reads until EAGAIN, as the lab's RETR client does), buffer and pipe
  sizes of the lab's client and larger. The limit is the best variant's median, measured
  in the same run (:func:`best`): a limit is the best any receiver reaches on the path;
- socket buffers: kernel autotuning (no ``SO_SNDBUF``/``SO_RCVBUF``), as tpd and the
  load generator leave them.

The same process uploads as an FTP client (:func:`measure_ftp_stor`: PASV + STOR per
upload, the file sent with blocking ``sendfile(2)``, the load generator's STOR syscall),
a reference for a server's STOR throughput.

A server is judged by the same C receiver as an FTP client (:func:`measure_ftp_retr`:
PASV + RETR per download), so ``server / limit`` compares senders only and is <= 1 up
to noise. Throughput = payload bytes / summed per-download time (from just before the
request to EOF on the data socket), whole downloads repeated for ``duration`` seconds.
A figure above the limit means the limit is not the best receiver on the path:
:func:`share_of_limit` refuses to give that ratio (:class:`LimitTooLowError`).

The binary is compiled on first use with the system C compiler (``cc``, else ``gcc``,
``clang``) into ``<cache_dir>/netlimit/netlimit-<hash>`` (``Settings.cache_dir``), keyed
by the SHA-256 of the source, compiler path and flags, so an edited source is rebuilt.
"""
from __future__ import annotations

import ipaddress
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner.load import cbuild

SOURCE = Path(__file__).with_name("netlimit.c")
Receiver = Literal["recv", "splice"]
RECEIVERS: tuple[Receiver, ...] = ("recv", "splice")
#: Default receive buffer of the "recv" receiver (and requested pipe size of "splice"), bytes.
DEFAULT_BUFSIZE = 4 << 20
#: Most seconds one measurement may run (the C tool refuses more).
MAX_DURATION = 600.0



@dataclass(frozen=True)
class Variant:
    """One configuration of the C receiver.

    ``receiver``: ``"recv"`` or ``"splice"``; ``bufsize``: the recv buffer or the asked
    pipe size, bytes (a pipe is capped by ``/proc/sys/fs/pipe-max-size``); ``rcvlowat``:
    ``SO_RCVLOWAT`` in bytes, 0 = none (blocking reads) — with it the receiver waits in
    ``poll(2)`` and reads until EAGAIN, at most 8 reads per wake-up (netlimit.c)."""

    receiver: Receiver
    bufsize: int
    rcvlowat: int = 0

    @property
    def label(self) -> str:
        """E.g. ``"splice 1 MiB RCVLOWAT 512 KiB"`` or ``"recv 4 MiB"``."""
        lw = f" RCVLOWAT {_size(self.rcvlowat)}" if self.rcvlowat else ""
        return f"{self.receiver} {_size(self.bufsize)}{lw}"


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB"


#: The C receiver's variants measured for the limit and as the reference client: the
#: plain blocking receivers (4 MiB buffer; 4 MiB pipe asked), and every technique of the
#: lab's RETR client (runner/load/ftp/retr.py): splice through a 1 MiB pipe with
#: SO_RCVLOWAT at half of it (its default), recv into 256 KiB with SO_RCVLOWAT 128 KiB
#: (its "reader" mode), and the same at 4 MiB / 2 MiB.
VARIANTS: tuple[Variant, ...] = (
    Variant("recv", DEFAULT_BUFSIZE),
    Variant("splice", DEFAULT_BUFSIZE),
    Variant("splice", 1 << 20, 512 << 10),
    Variant("recv", 256 << 10, 128 << 10),
    Variant("recv", DEFAULT_BUFSIZE, DEFAULT_BUFSIZE // 2),
)


class NetlimitError(RuntimeError):
    """netlimit could not be built or a measurement failed (the message says which)."""


class LimitTooLowError(ValueError):
    """A throughput above the measured limit: the limit is wrong (not the best receiver
    on the path), so no share of it is given. The message names both figures."""


def best(medians: dict[str, float]) -> tuple[str, float]:
    """The limit among measured variants: ``(label, value)`` of the highest median of
    ``medians`` (label -> median, any unit). Raises ValueError when it is empty."""
    if not medians:
        raise ValueError("no variant of the limit was measured")
    label = max(medians, key=lambda k: medians[k])
    return label, medians[label]


def share_of_limit(value: float, limit: float, *, what: str = "ours", limit_label: str = "limit") -> float:
    """``value / limit``, the share of the limit a figure reaches (same unit for both).

    Raises ValueError when ``limit`` is not positive, and LimitTooLowError when the ratio
    is above 1.0: a limit is the best any receiver reaches on the path, so a figure above
    it says the limit was measured wrong (a receiver technique missing), not that
    ``what`` beat the path."""
    if not limit > 0:
        raise ValueError(f"the limit must be positive, got {limit!r}")
    ratio = value / limit
    if ratio > 1.0:
        raise LimitTooLowError(
            f"{what} {value:,.0f} > {limit_label} {limit:,.0f} (ratio {ratio:.2f}): the limit is wrong, "
            "it is not the best receiver on this path; no ratio given")
    return ratio


@dataclass(frozen=True)
class LimitResult:
    """One netlimit measurement (the tool's JSON; sizes in bytes, times in seconds).

    ``mode``: ``"pair"`` (C sender -> C receiver) or ``"ftp"`` (a server -> C receiver);
    ``receiver``: ``"recv"`` or ``"splice"``; ``chunk_bytes``: the recv buffer or the pipe
    size in force; ``transfers``: whole downloads; ``bytes``/``seconds``: their payload and
    summed time; ``gbps`` = bytes*8/seconds/1e9, ``mib_s`` = bytes/seconds/2**20;
    ``min_gbps``/``max_gbps``: the slowest/fastest download; ``receiver_cpu_s``/
    ``sender_cpu_s``: user+system CPU of each process (sender: pair only, else None);
    ``sender_cpu``/``receiver_cpu``: the CPU each was pinned to (None: not pinned);
    ``rcvlowat``: SO_RCVLOWAT of the data socket in bytes (0: none, blocking reads).
    """

    mode: str
    receiver: str
    chunk_bytes: int
    transfers: int
    bytes: int
    seconds: float
    gbps: float
    mib_s: float
    min_gbps: float
    max_gbps: float
    receiver_cpu_s: float
    sender_cpu_s: float | None
    sender_cpu: int | None
    receiver_cpu: int | None
    rcvlowat: int = 0


def build(source: Path = SOURCE, build_dir: Path | None = None, compiler: str | None = None) -> Path:
    """The netlimit binary (runner.load.cbuild.build: compiled once per source, compiler and
    flags). Raises NetlimitError when there is no compiler or the source does not compile."""
    try:
        return cbuild.build(source, "netlimit", build_dir=build_dir, compiler=compiler)
    except cbuild.CBuildError as e:
        raise NetlimitError(str(e)) from None


def run_tool(args: list[str], binary: Path | None = None, timeout: float = 160.0) -> LimitResult:
    """Run netlimit with ``args`` (see netlimit.c) and parse its JSON line; ``timeout`` in
    seconds (the measure functions pass their duration + 150 s: the tool bounds one
    download to 120 s). Raises NetlimitError with the tool's own message on a non-zero
    exit, a timeout or unparsable output."""
    exe = binary or build()
    try:
        r = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise NetlimitError(f"netlimit {' '.join(args)}: no result within {timeout:g} s") from e
    if r.returncode != 0:
        raise NetlimitError(r.stderr.strip() or f"netlimit exited with status {r.returncode}")
    try:
        return LimitResult(**json.loads(r.stdout.strip().splitlines()[-1]))
    except (ValueError, TypeError, IndexError) as e:
        raise NetlimitError(f"netlimit printed no result: {r.stdout[-500:]!r}") from e


def _common(duration: float, receiver: str, bufsize: int, rcvlowat: int = 0) -> list[str]:
    if not 0 < duration <= MAX_DURATION:
        raise ValueError(f"duration must be in (0, {MAX_DURATION:g}] seconds, got {duration!r}")
    if receiver not in RECEIVERS:
        raise ValueError(f"receiver must be one of {RECEIVERS}, got {receiver!r}")
    if not 4096 <= bufsize <= 1 << 28:
        raise ValueError(f"bufsize must be in [4096, 2**28] bytes, got {bufsize!r}")
    if not 0 <= rcvlowat <= 1 << 28:
        raise ValueError(f"rcvlowat must be in [0, 2**28] bytes, got {rcvlowat!r}")
    return ["--duration", repr(float(duration)), "--recv", receiver, "--bufsize", str(bufsize),
            "--rcvlowat", str(rcvlowat)]


def _cpu(flag: str, param: str, cpu: int | None) -> list[str]:
    if cpu is None:
        return []
    if cpu < 0:
        raise ValueError(f"{param} must be a CPU number >= 0 or None, got {cpu!r}")
    return [flag, str(cpu)]


def measure_pair(file: Path, duration: float = 1.0, *, receiver: Receiver = "recv",
                 sender_cpu: int | None = None, receiver_cpu: int | None = None,
                 bufsize: int = DEFAULT_BUFSIZE, rcvlowat: int = 0, binary: Path | None = None) -> LimitResult:
    """One variant of the loopback limit: C ``sendfile`` sender -> C receiver (``receiver``,
    ``bufsize``, ``rcvlowat``: :class:`Variant`), downloading ``file`` whole for
    ``duration`` seconds (at least once), each side pinned as given.

    Raises ValueError on a bad argument (missing/empty file, duration outside (0, 600] s,
    unknown receiver, bufsize outside [4 KiB, 256 MiB], rcvlowat outside [0, 256 MiB],
    negative CPU), NetlimitError when
    the tool cannot be built or the run fails."""
    file = Path(file)
    if not file.is_file() or file.stat().st_size == 0:
        raise ValueError(f"file must be a non-empty regular file: {file}")
    args = ["pair", "--file", str(file), *_common(duration, receiver, bufsize, rcvlowat),
            *_cpu("--sender-cpu", "sender_cpu", sender_cpu), *_cpu("--receiver-cpu", "receiver_cpu", receiver_cpu)]
    return run_tool(args, binary, duration + 150.0)


def _loopback(host: str, port: int, user: str, password: str, name: str) -> None:
    """Raise ValueError unless ``host`` is in 127.0.0.0/8, ``port`` in 1..65535 and no
    CR or LF is in ``user``, ``password`` or ``name``."""
    try:
        addr = ipaddress.IPv4Address(host)
    except ValueError as e:
        raise ValueError(f"host must be an IPv4 loopback address, got {host!r}") from e
    if not addr.is_loopback:
        raise ValueError(f"host must be in 127.0.0.0/8 (loopback only), got {host!r}")
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be in 1..65535, got {port!r}")
    if any(c in s for s in (user, password, name) for c in "\r\n"):
        raise ValueError("user, password and name must not contain CR or LF")


def measure_ftp_retr(port: int, user: str, password: str, name: str, duration: float = 1.0, *,
                     size: int | None = None, host: str = "127.0.0.1", receiver: Receiver = "recv",
                     cpu: int | None = None, bufsize: int = DEFAULT_BUFSIZE, rcvlowat: int = 0,
                     write_piece: int = 0, binary: Path | None = None) -> LimitResult:
    """A server's RETR throughput into the C receiver: log in once, then PASV + ``RETR
    name`` + drain, repeated for ``duration`` seconds (at least once); the receiver pinned
    to ``cpu``. ``size`` (bytes), when given, is checked for every download. ``rcvlowat``
    (bytes, 0 = the kernel's 1 byte): ``SO_RCVLOWAT`` on each data socket, as the load
    generator's RETR sets it (half its splice pipe). ``write_piece`` (bytes, 0 = off;
    ``recv`` only): each read's bytes also ``fwrite(3)``n to /dev/null in pieces of at
    most this size, curl's ``-o /dev/null`` path (16384 = libcurl's CURL_MAX_WRITE_SIZE;
    netlimit.c).

    Raises ValueError on a bad argument (host not in 127.0.0.0/8, port outside 1..65535,
    CR/LF in user/password/name, rcvlowat or write_piece outside [0, 256 MiB], write_piece
    with the splice receiver, and as
    :func:`measure_pair`), NetlimitError when the
    login, a transfer or the build fails (the FTP reply is in the message)."""
    _loopback(host, port, user, password, name)
    if not 0 <= rcvlowat <= 1 << 28:
        raise ValueError(f"rcvlowat must be in [0, 2**28] bytes, got {rcvlowat!r}")
    if not 0 <= write_piece <= 1 << 28 or (write_piece and receiver != "recv"):
        raise ValueError("write_piece must be in [0, 2**28] bytes and only with receiver 'recv', "
                         f"got {write_piece!r}")
    args = ["ftp", "--host", host, "--port", str(port), "--user", user, "--password", password,
            "--name", name, *_common(duration, receiver, bufsize, rcvlowat), *_cpu("--cpu", "cpu", cpu)]
    if size is not None:
        args += ["--size", str(size)]
    if write_piece:
        args += ["--write-piece", str(write_piece)]
    return run_tool(args, binary, duration + 150.0)


def measure_ftp_stor(port: int, user: str, password: str, name: str, file: Path, duration: float = 1.0, *,
                     host: str = "127.0.0.1", cpu: int | None = None, send_piece: int = 0,
                     binary: Path | None = None) -> LimitResult:
    """A server's STOR throughput from the C uploader: log in once, then PASV + ``STOR
    name`` + ``file`` whole with blocking ``sendfile(2)`` + close + the 2xx reply, repeated
    for ``duration`` seconds (at least once); after each upload, untimed, ``SIZE name`` must
    equal the file's size. Throughput = bytes / summed time from just before ``STOR`` to
    the 2xx reply; the uploader pinned to ``cpu``. The result's ``receiver`` is
    ``"sendfile"``. With ``send_piece`` (bytes, > 0) the file is instead ``read(2)`` and
    ``send(2)``-ed that many bytes at a time, a copying uploader as curl ``-T`` is (65536:
    curl's upload buffer); the result's ``receiver`` is then ``"copy"``.

    Raises ValueError on a bad argument (as :func:`measure_ftp_retr`; ``file`` not a
    non-empty regular file; ``send_piece`` outside [0, 256 MiB]), NetlimitError when the
    login, an upload, the size check or the build fails (the FTP reply is in the message)."""
    file = Path(file)
    if not file.is_file() or file.stat().st_size == 0:
        raise ValueError(f"file must be a non-empty regular file: {file}")
    _loopback(host, port, user, password, name)
    if not 0 < duration <= MAX_DURATION:
        raise ValueError(f"duration must be in (0, {MAX_DURATION:g}] seconds, got {duration!r}")
    args = ["stor", "--host", host, "--port", str(port), "--user", user, "--password", password,
            "--name", name, "--file", str(file), "--duration", repr(float(duration)), *_cpu("--cpu", "cpu", cpu)]
    if not 0 <= send_piece <= 1 << 28:
        raise ValueError(f"send_piece must be in [0, 2**28] bytes, got {send_piece!r}")
    if send_piece:
        args += ["--send-piece", str(send_piece)]
    return run_tool(args, binary, duration + 150.0)
