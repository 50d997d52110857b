"""runner.selftest.limit and netlimit.c: the tool builds with the system compiler, measures a
nonzero loopback figure in a short bounded run (pair and FTP against the session's
pyftpdlib) in every receiver variant, the limit is the best of them, a ratio above the
limit is refused, and the tool fails clearly on a missing compiler or bad arguments.
Figures are only checked for plausibility (bytes = whole downloads), never against a speed."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from runner.selftest import limit
from runner.selftest.limit import (
    VARIANTS,
    LimitTooLowError,
    NetlimitError,
    best,
    build,
    measure_ftp_retr,
    measure_ftp_stor,
    measure_pair,
    run_tool,
    share_of_limit,
)
from tests.support.pyftpd import PASSWORD, USER

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on PATH")
SIZE = 4 << 20


@pytest.fixture(scope="module")
def binary(tmp_path_factory) -> Path:
    return build(build_dir=tmp_path_factory.mktemp("netlimit-build"))


@pytest.fixture(scope="module")
def payload(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("netlimit-file") / "f.bin"
    p.write_bytes(os.urandom(SIZE))
    return p


def _cpus() -> tuple[int | None, int | None]:
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)


@pytest.mark.parametrize("receiver", limit.RECEIVERS)
def test_pair_measures_whole_downloads(binary, payload, receiver):
    scpu, rcpu = _cpus()
    r = measure_pair(payload, 0.3, receiver=receiver, sender_cpu=scpu, receiver_cpu=rcpu, binary=binary)
    assert r.mode == "pair" and r.receiver == receiver
    assert r.transfers >= 1 and r.bytes == r.transfers * SIZE
    assert r.seconds > 0 and r.gbps > 0
    assert r.gbps == pytest.approx(r.bytes * 8 / r.seconds / 1e9, rel=1e-3)
    assert r.mib_s == pytest.approx(r.bytes / r.seconds / 2**20, rel=1e-3)
    assert r.min_gbps <= r.gbps * 1.001 and r.max_gbps >= r.gbps * 0.999
    assert (r.sender_cpu, r.receiver_cpu) == (scpu, rcpu)
    assert r.sender_cpu_s is not None and r.sender_cpu_s >= 0 and r.receiver_cpu_s > 0
    # the 4 MiB recv buffer as asked; splice's pipe is at most the kernel's pipe-max-size
    max_pipe = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    assert r.chunk_bytes == (limit.DEFAULT_BUFSIZE if receiver == "recv" else min(limit.DEFAULT_BUFSIZE, max_pipe))


def test_every_variant_is_measured_and_the_limit_is_the_best(binary, payload):
    """The lab client's techniques are in the C receiver: recv and splice, with SO_RCVLOWAT
    (then a poll(2) wait) and without, at the lab client's buffer and pipe sizes; each
    variant downloads whole files and reports what was in force; the limit is the
    highest median of the variants measured in the same run."""
    scpu, rcpu = _cpus()
    max_pipe = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    assert {v.receiver for v in VARIANTS} == {"recv", "splice"}
    assert {v.rcvlowat > 0 for v in VARIANTS} == {True, False}
    # the lab's RETR client (runner/load/ftp/retr.py): splice through a >= 1 MiB pipe, SO_RCVLOWAT half of it
    from runner.load.ftp.retr import SPLICE_PIPE
    assert limit.Variant("splice", SPLICE_PIPE, SPLICE_PIPE // 2) in VARIANTS
    assert len({v.label for v in VARIANTS}) == len(VARIANTS)
    medians: dict[str, list[float]] = {v.label: [] for v in VARIANTS}
    for _ in range(2):
        for v in VARIANTS:
            r = measure_pair(payload, 0.2, receiver=v.receiver, bufsize=v.bufsize, rcvlowat=v.rcvlowat,
                             sender_cpu=scpu, receiver_cpu=rcpu, binary=binary)
            assert r.receiver == v.receiver and r.rcvlowat == v.rcvlowat
            assert r.transfers >= 1 and r.bytes == r.transfers * SIZE and r.mib_s > 0
            assert r.chunk_bytes == (v.bufsize if v.receiver == "recv" else min(v.bufsize, max_pipe))
            medians[v.label].append(r.mib_s)
    med = {k: sorted(x)[len(x) // 2] for k, x in medians.items()}
    label, top = best(med)
    assert top == max(med.values()) and med[label] == top
    assert all(share_of_limit(m, top) <= 1.0 for m in med.values())
    with pytest.raises(ValueError, match="no variant"):
        best({})


def test_a_ratio_above_the_limit_is_refused():
    assert share_of_limit(900.0, 1000.0) == pytest.approx(0.9)
    assert share_of_limit(1000.0, 1000.0) == 1.0
    with pytest.raises(LimitTooLowError, match=r"ours 4,062 > limit 1,767 \(ratio 2.30\): the limit is wrong"):
        share_of_limit(4062.0, 1767.0)
    with pytest.raises(ValueError, match="must be positive"):
        share_of_limit(1.0, 0.0)


def test_selftest_refuses_a_ratio_to_a_limit_forced_low(binary, pyftpd):
    """benchmarks/loadgen_selftest.py's ratio lines: the reference is measured (the C
    receiver against pyftpdlib), the limit is forced low (a hundredth of a measured
    pair): no ratio to the limit is printed, the line says the limit is wrong; with the
    limit as measured, the reference's share of it is printed."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "loadgen_selftest", Path(__file__).resolve().parents[3] / "benchmarks" / "loadgen_selftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    host, port, home = pyftpd
    (home / "netlimit-ratio.bin").write_bytes(os.urandom(SIZE))
    v = VARIANTS[0]
    ref = measure_ftp_retr(port, USER, PASSWORD, "netlimit-ratio.bin", 0.2, size=SIZE, host=host,
                           receiver=v.receiver, bufsize=v.bufsize, binary=binary)
    lim = measure_pair(home / "netlimit-ratio.bin", 0.2, receiver=v.receiver, bufsize=v.bufsize, binary=binary)
    med = {"ours: run_workload retr (default)": (ref.mib_s, 0.0), f"reference: C receiver {v.label}": (ref.mib_s, 0.0),
           f"limit: C sendfile -> C {v.label}": (lim.mib_s / 100, 0.0)}
    lines = mod.limit_ratio_lines(med, "ours: run_workload retr (default)")
    refused = [x for x in lines if x.startswith(("ratio ours / limit", "ratio reference / limit"))]
    assert len(refused) == 2 and all("refused: " in x and "the limit is wrong" in x for x in refused), lines
    assert not any(x.startswith("ratio ours / limit: ") and "refused" not in x for x in lines)
    high = dict(med, **{f"limit: C sendfile -> C {v.label}": (max(lim.mib_s, ref.mib_s) * 1.0, 0.0)})
    ok = mod.limit_ratio_lines(high, "ours: run_workload retr (default)")
    assert any(x.startswith("ratio ours / limit: 0.") or x == "ratio ours / limit: 1.00" for x in ok), ok


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.label)
def test_ftp_receiver_variants_against_pyftpdlib(binary, pyftpd, variant):
    host, port, home = pyftpd
    (home / "netlimit.bin").write_bytes(os.urandom(SIZE))
    r = measure_ftp_retr(port, USER, PASSWORD, "netlimit.bin", 0.2, size=SIZE, host=host, receiver=variant.receiver,
                         bufsize=variant.bufsize, rcvlowat=variant.rcvlowat, binary=binary)
    assert r.mode == "ftp" and r.transfers >= 1 and r.bytes == r.transfers * SIZE and r.rcvlowat == variant.rcvlowat


@pytest.mark.parametrize("receiver", limit.RECEIVERS)
def test_ftp_receiver_against_pyftpdlib(binary, pyftpd, receiver):
    host, port, home = pyftpd
    (home / "netlimit.bin").write_bytes(os.urandom(SIZE))
    r = measure_ftp_retr(port, USER, PASSWORD, "netlimit.bin", 0.3, size=SIZE, host=host, receiver=receiver,
                         binary=binary)
    assert r.mode == "ftp" and r.transfers >= 1 and r.bytes == r.transfers * SIZE and r.gbps > 0
    assert r.sender_cpu_s is None and r.sender_cpu is None


def test_ftp_errors_carry_the_server_reply(binary, pyftpd):
    host, port, _ = pyftpd
    with pytest.raises(NetlimitError, match="530"):
        measure_ftp_retr(port, USER, "wrong", "x", 0.3, binary=binary)
    with pytest.raises(NetlimitError, match=r"RETR.*550"):
        measure_ftp_retr(port, USER, PASSWORD, "no-such-file.bin", 0.3, binary=binary)


def test_ftp_size_mismatch_is_a_short_download(binary, pyftpd):
    host, port, home = pyftpd
    (home / "netlimit-small.bin").write_bytes(b"x" * 1000)
    with pytest.raises(NetlimitError, match="short download: 1000 of 2000"):
        measure_ftp_retr(port, USER, PASSWORD, "netlimit-small.bin", 0.3, size=2000, binary=binary)


def test_stor_uploads_whole_files_and_checks_their_size(binary, pyftpd, payload):
    """The C uploader's files arrive whole (the server's copy equals the source), each
    upload counted once; a server that loses uploads is caught by the SIZE check."""
    host, port, home = pyftpd
    r = measure_ftp_stor(port, USER, PASSWORD, "netlimit-stor.bin", payload, 0.3, host=host, binary=binary)
    assert r.mode == "stor" and r.receiver == "sendfile" and r.chunk_bytes == 0
    assert r.transfers >= 1 and r.bytes == r.transfers * SIZE and r.seconds > 0
    assert r.mib_s == pytest.approx(r.bytes / r.seconds / 2**20, rel=1e-3)
    assert (home / "netlimit-stor.bin").read_bytes() == payload.read_bytes()
    with pytest.raises(NetlimitError, match="530"):
        measure_ftp_stor(port, USER, "wrong", "x.bin", payload, 0.3, binary=binary)
    with pytest.raises(ValueError, match="non-empty regular file"):
        measure_ftp_stor(port, USER, PASSWORD, "x.bin", home / "missing.bin", 0.3, binary=binary)


def test_copying_receiver_and_uploader_move_whole_files(binary, pyftpd, payload):
    """The curl-like C clients: a receiver that also fwrite()s each read to /dev/null in
    16 KiB pieces, an uploader that read()s and send()s 64 KiB at a time; files arrive whole."""
    host, port, home = pyftpd
    (home / "netlimit.bin").write_bytes(os.urandom(SIZE))
    r = measure_ftp_retr(port, USER, PASSWORD, "netlimit.bin", 0.2, size=SIZE, host=host, receiver="recv",
                         bufsize=100 * 1024, write_piece=16 * 1024, binary=binary)
    assert r.receiver == "recv" and r.chunk_bytes == 100 * 1024 and r.transfers >= 1 and r.bytes == r.transfers * SIZE
    u = measure_ftp_stor(port, USER, PASSWORD, "netlimit-copy.bin", payload, 0.2, host=host, send_piece=65536,
                         binary=binary)
    assert u.receiver == "copy" and u.chunk_bytes == 65536 and u.transfers >= 1 and u.bytes == u.transfers * SIZE
    assert (home / "netlimit-copy.bin").read_bytes() == payload.read_bytes()
    with pytest.raises(ValueError, match="write_piece"):
        measure_ftp_retr(port, USER, PASSWORD, "netlimit.bin", 0.2, receiver="splice", write_piece=4096,
                         binary=binary)
    with pytest.raises(ValueError, match="send_piece"):
        measure_ftp_stor(port, USER, PASSWORD, "x.bin", payload, 0.2, send_piece=-1, binary=binary)


def test_stor_on_a_server_dropping_uploads_is_a_short_upload(binary, payload, tmp_path):
    from tests.support.pyftpd import start_pyftpd, stop

    proc, port = start_pyftpd(tmp_path, drop_third=True)
    try:
        with pytest.raises(NetlimitError, match=r"SIZE: unexpected reply 550|short upload"):
            measure_ftp_stor(port, USER, PASSWORD, "dropped.bin", payload, 5.0, binary=binary)
    finally:
        stop(proc)


def test_build_is_cached_by_source_hash(tmp_path, binary):
    first = build(build_dir=tmp_path)
    mtime = first.stat().st_mtime_ns
    assert build(build_dir=tmp_path) == first and first.stat().st_mtime_ns == mtime
    edited = tmp_path / "netlimit.c"
    edited.write_text(limit.SOURCE.read_text() + "\n/* edited */\n")
    other = build(source=edited, build_dir=tmp_path)
    assert other != first and other.is_file()


def test_missing_compiler_is_a_clear_error(tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(NetlimitError, match="no C compiler on PATH"):
        build(build_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_compile_error_shows_the_compiler_output(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return nope; }\n")
    with pytest.raises(NetlimitError, match="nope"):
        build(source=bad, build_dir=tmp_path / "out")
    assert not list((tmp_path / "out").iterdir())   # no half-written binary left


@pytest.mark.parametrize("kwargs, message", [
    ({"duration": 0}, "duration must be in"),
    ({"duration": 601}, "duration must be in"),
    ({"receiver": "mmap"}, "receiver must be one of"),
    ({"bufsize": 100}, "bufsize must be in"),
    ({"rcvlowat": -1}, "rcvlowat must be in"),
    ({"sender_cpu": -1}, "sender_cpu must be a CPU"),
])
def test_pair_bad_arguments(binary, payload, kwargs, message):
    with pytest.raises(ValueError, match=message):
        measure_pair(payload, **{"duration": 0.3, **kwargs}, binary=binary)


def test_pair_needs_a_nonempty_file(binary, tmp_path):
    (tmp_path / "empty").touch()
    for p in (tmp_path / "empty", tmp_path / "missing", tmp_path):
        with pytest.raises(ValueError, match="non-empty regular file"):
            measure_pair(p, 0.3, binary=binary)


@pytest.mark.parametrize("host", ["10.0.0.1", "::1", "localhost"])
def test_ftp_is_loopback_ipv4_only(binary, host):
    with pytest.raises(ValueError, match="host must"):
        measure_ftp_retr(21, "u", "p", "f", 0.3, host=host, binary=binary)


def test_ftp_rejects_crlf(binary):
    with pytest.raises(ValueError, match="CR or LF"):
        measure_ftp_retr(21, "u", "p", "f\r\nDELE x", 0.3, binary=binary)


@pytest.mark.parametrize("args, message", [
    ([], "usage: netlimit"),
    (["bogus"], "unknown mode 'bogus'"),
    (["pair"], "pair needs --file"),
    (["pair", "--file"], "--file needs a value"),
    (["pair", "--file", "/etc/hostname", "--duration", "-1"], "--duration: expected seconds"),
    (["pair", "--file", "/etc/hostname", "--bufsize", "12x"], "--bufsize: expected an integer"),
    (["pair", "--file", "/etc/hostname", "--recv", "mmap"], "--recv: expected recv or splice"),
    (["pair", "--file", "/etc/hostname", "--rcvlowat", "-5"], "--rcvlowat: expected an integer"),
    (["pair", "--file", "/nonexistent/x"], "--file /nonexistent/x"),
    (["ftp", "--port", "21"], "ftp needs --port, --user"),
    (["ftp", "--file", "x"], "unknown option '--file' for mode ftp"),
    (["ftp", "--port", "21", "--user", "u", "--password", "p", "--name", "f", "--recv", "splice",
      "--write-piece", "4096"], "--write-piece needs --recv recv"),
    (["stor", "--send-piece", "0"], "--send-piece: expected an integer"),
    (["ftp", "--send-piece", "4096"], "unknown option '--send-piece' for mode ftp"),
    (["ftp", "--host", "192.168.1.1", "--port", "21", "--user", "u", "--password", "p", "--name", "f"],
     "not a 127.0.0.0/8 address"),
])
def test_tool_rejects_bad_arguments(binary, args, message):
    with pytest.raises(NetlimitError, match=message.replace("(", r"\(")):
        run_tool(args, binary, timeout=10)
