"""Bounded libFuzzer runs of the FTP command parser and the HTTP request
parser (servers/tpd/fuzz/); the HTTP target also drives the Location
encoder (301/201 headers) and the directory-listing line formatter; the
TLS target drives tpd's OpenSSL state machine through memory BIOs (a
handshake fed the input, a real handshake followed by the input as
records) and the AUTH/PBSZ/PROT states.  Skipped when clang is not installed; a failing
build with clang present (e.g. libclang-rt-14-dev missing) is a test failure.

Each run starts from the seeds below plus the stored corpus of servers/tpd/fuzz/corpus/TARGET/:
the inputs earlier long runs found that reach new code (libFuzzer's ``-merge=1`` keeps only
those). libFuzzer first executes every corpus input under ASan and UBSan, so the coverage
those runs reached is checked again in seconds, then fuzzes onwards from there.
TPD_FUZZ_SECONDS (default 5) sets the fuzzing time per target after that replay; with
TPD_FUZZ_MERGE=1 the inputs a run finds that add coverage are merged into the stored corpus
(``make fuzz``: 600 s per target)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.tpd.conftest import BUILD, TPD_DIR
from tests.tpd.tls_support import client_hello

pytestmark = pytest.mark.slow

SEEDS = {
    "fuzz_ftp": [b"USER alice\r\n", b"PORT 127,0,0,1,4,1\r\n", b"EPRT |2|::1|5000|\r\n",
                 b"CWD ../../a/./b//c\r\n", b"\xff\xf4\xff\xf2ABOR\r\n", b"RETR x\n"],
    "fuzz_http": [b"GET /a%20b?q HTTP/1.1\r\nHost: x\r\nRange: bytes=1-5\r\n\r\n",
                  b"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5;ext\r\nhello\r\n0\r\nTrailer: x\r\n\r\n",
                  b"POST /p HTTP/1.0\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc",
                  b"GET /%2fevil.example.com%2f%2e%2e HTTP/1.1\r\nHost: x\r\n\r\n",
                  b"GET /%0d%0aSet-Cookie:%20x=1%0d%0aX:/.. HTTP/1.1\r\n\r\n",
                  b"PUT /a%20b/%C3%A9%25?q HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"],
    # first byte: 0 handshake fed the rest (a length byte, then a real
    # ClientHello), 1 records after a real handshake, 2 AUTH/PBSZ/PROT lines
    "fuzz_tls": [b"\x00\xff" + client_hello(),
                 b"\x01\x00\x17\x03\x03\x00\x10" + b"A" * 16,
                 b"\x01\x01\x15\x03\x03\x00\x02\x01\x00",
                 b"\x02\x01AUTH TLS\r\nPBSZ 0\r\nPROT P\r\nUSER a\r\nPASS b\r\nAUTH TLS\r\n",
                 b"\x02\x01PROT P\r\nAUTH SSL\r\nauth tls-c\r\nPBSZ 99999999999999999999999\r\n"
                 b"PROT E\r\nPROT C\r\n",
                 b"\x02\x00AUTH TLS\r\nPBSZ 0\r\n"],
}


#: the stored corpus, one folder per target (files named by libFuzzer: the SHA-1 of the input)
CORPUS = TPD_DIR / "fuzz" / "corpus"


#: Run the fuzzer as the child of a small shell, not of pytest: Linux carries a process's
#: peak RSS across execve (``ru_maxrss``, which libFuzzer's ``-rss_limit_mb`` reads), so a
#: fuzzer exec'd from a pytest grown past the limit by the tests before it is "out of
#: memory" before its first input; a new process's peak starts from its own pages. The
#: shell's commands after the fuzzer keep it from exec'ing the fuzzer in its place.
FRESH_RSS = ["/bin/sh", "-c", '"$@"; rc=$?; exit $rc', "sh"]


@pytest.fixture(scope="module")
def fuzzers():
    if not shutil.which("clang"):
        pytest.skip("clang not installed")
    p = subprocess.run(["make", "-C", str(TPD_DIR), "fuzz"], capture_output=True, timeout=300)
    if p.returncode != 0:
        pytest.fail("libFuzzer build failed (scripts/install.sh installs clang and libclang-rt-14-dev): "
                    + p.stderr.decode()[-500:])
    return BUILD


@pytest.mark.parametrize("target", ["fuzz_ftp", "fuzz_http", "fuzz_tls"])
def test_fuzz_target(fuzzers, target, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, seed in enumerate(SEEDS[target]):
        (corpus / f"seed{i}").write_bytes(seed)
    merge = os.environ.get("TPD_FUZZ_MERGE") == "1"
    stored = sorted((CORPUS / target).iterdir()) if (CORPUS / target).is_dir() else []
    assert stored or merge, f"no stored corpus in {CORPUS / target} (make fuzz makes one)"
    for f in stored:
        shutil.copyfile(f, corpus / f.name)
    secs = int(os.environ.get("TPD_FUZZ_SECONDS", "5"))
    p = subprocess.run([*FRESH_RSS, str(fuzzers / target), f"-max_total_time={secs}", "-max_len=4096",
                        "-timeout=5", "-rss_limit_mb=1024",
                        f"-artifact_prefix={tmp_path}/", str(corpus)],
                       capture_output=True, timeout=secs + 120)
    tail = p.stderr.decode(errors="replace")[-3000:]
    assert p.returncode == 0, tail
    assert "Done" in tail
    # every stored input was read and executed before the fuzzing began
    m = re.search(r"INFO: seed corpus: files: (\d+)", p.stderr.decode(errors="replace"))
    assert m and int(m.group(1)) == len(stored) + len(SEEDS[target]), tail
    if merge:
        (CORPUS / target).mkdir(parents=True, exist_ok=True)
        m = subprocess.run([*FRESH_RSS, str(fuzzers / target), "-merge=1", "-max_len=4096", "-timeout=5",
                            "-rss_limit_mb=1024", str(CORPUS / target), str(corpus)],
                           capture_output=True, timeout=600)
        assert m.returncode == 0, m.stderr.decode(errors="replace")[-3000:]
