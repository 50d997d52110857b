"""tpd with the real command-line clients curl, wget and lftp (Debian
packages; each test is skipped when its client is not installed)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def need(tool):
    if not shutil.which(tool):
        pytest.skip(f"{tool} not installed")


def run(args, cwd=None, timeout=60):
    p = subprocess.run(args, cwd=cwd, capture_output=True, timeout=timeout)
    assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-2000:])
    return p


def test_curl_ftp_and_http(server, tmp_path):
    need("curl")
    data = os.urandom(2_500_000)
    (server.home / "c.bin").write_bytes(data)
    base = f"ftp://alice:secret@127.0.0.1:{server.ftp_port}"
    out = tmp_path / "out.bin"
    run(["curl", "-sS", "--fail", "-o", str(out), f"{base}/c.bin"])          # EPSV
    assert out.read_bytes() == data
    run(["curl", "-sS", "--fail", "--disable-epsv", "-o", str(out), f"{base}/c.bin"])  # PASV
    assert out.read_bytes() == data
    run(["curl", "-sS", "--fail", "-P", "127.0.0.1", "-o", str(out), f"{base}/c.bin"])  # EPRT/PORT
    assert out.read_bytes() == data
    up = tmp_path / "up.bin"
    up.write_bytes(data[:777_777])
    run(["curl", "-sS", "--fail", "-T", str(up), f"{base}/sub/up.bin", "--ftp-create-dirs"])
    assert (server.home / "sub" / "up.bin").read_bytes() == data[:777_777]
    listing = run(["curl", "-sS", "--fail", f"{base}/"]).stdout
    assert b"c.bin" in listing
    # resume
    out.write_bytes(data[:1000])
    run(["curl", "-sS", "--fail", "-C", "-", "-o", str(out), f"{base}/c.bin"])
    assert out.read_bytes() == data
    # HTTP: GET, range, PUT with Expect: 100-continue, chunked POST
    h = f"http://127.0.0.1:{server.http_port}"
    run(["curl", "-sS", "--fail", "-o", str(out), f"{h}/c.bin"])
    assert out.read_bytes() == data
    r = run(["curl", "-sS", "--fail", "-r", "10-19", f"{h}/c.bin"]).stdout
    assert r == data[10:20]
    run(["curl", "-sS", "--fail", "-T", str(up), "-H", "Expect: 100-continue", f"{h}/put.bin"])
    assert (server.home / "put.bin").read_bytes() == data[:777_777]
    run(["curl", "-sS", "--fail", "-H", "Transfer-Encoding: chunked",
         "--data-binary", f"@{up}", f"{h}/post.bin"])
    assert (server.home / "post.bin").read_bytes() == data[:777_777]
    p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"{h}/nope"],
                       capture_output=True, timeout=30)
    assert p.stdout == b"404"


def test_wget_ftp_and_http(server, tmp_path):
    need("wget")
    data = os.urandom(1_234_567)
    (server.home / "w.bin").write_bytes(data)
    (server.home / "dir").mkdir()
    (server.home / "dir" / "a.txt").write_text("A")
    (server.home / "dir" / "b.txt").write_text("B")
    run(["wget", "-q", "-O", "ftp.bin",
         f"ftp://alice:secret@127.0.0.1:{server.ftp_port}/w.bin"], cwd=tmp_path)
    assert (tmp_path / "ftp.bin").read_bytes() == data
    run(["wget", "-q", "--no-passive-ftp", "-O", "act.bin",
         f"ftp://alice:secret@127.0.0.1:{server.ftp_port}/w.bin"], cwd=tmp_path)
    assert (tmp_path / "act.bin").read_bytes() == data
    run(["wget", "-q", "-r", "-nH", f"ftp://alice:secret@127.0.0.1:{server.ftp_port}/dir/"],
        cwd=tmp_path)
    assert (tmp_path / "dir" / "b.txt").read_text() == "B"
    run(["wget", "-q", "-O", "http.bin", f"http://127.0.0.1:{server.http_port}/w.bin"],
        cwd=tmp_path)
    assert (tmp_path / "http.bin").read_bytes() == data
    (tmp_path / "part.bin").write_bytes(data[:5000])
    run(["wget", "-q", "-c", "-O", "part.bin", f"http://127.0.0.1:{server.http_port}/w.bin"],
        cwd=tmp_path)
    assert (tmp_path / "part.bin").read_bytes() == data


def test_lftp(server, tmp_path):
    need("lftp")
    data = os.urandom(3_000_001)
    (server.home / "l.bin").write_bytes(data)
    (server.home / "tree" / "sub").mkdir(parents=True)
    (server.home / "tree" / "sub" / "deep.txt").write_text("deep")
    (tmp_path / "local.bin").write_bytes(data[:100_000])
    script = "; ".join([
        "set ftp:ssl-allow no", "set net:max-retries 1", "set net:timeout 10",
        f"open -u alice,secret ftp://127.0.0.1:{server.ftp_port}",
        "ls", "get l.bin -o got.bin", "put local.bin -o put.bin",
        "mkdir newdir", "cd newdir", "put local.bin", "cd ..",
        "mirror tree mirrored", "mv put.bin moved.bin", "rm l.bin",
        "set ftp:prefer-epsv no", "cls -l", "bye",
    ])
    p = run(["lftp", "-c", script], cwd=tmp_path, timeout=120)
    assert b"l.bin" in p.stdout
    assert (tmp_path / "got.bin").read_bytes() == data
    assert (server.home / "moved.bin").read_bytes() == data[:100_000]
    assert (server.home / "newdir" / "local.bin").read_bytes() == data[:100_000]
    assert (tmp_path / "mirrored" / "sub" / "deep.txt").read_text() == "deep"
    assert not (server.home / "l.bin").exists()
    # lftp parallel segmented download (several data connections + REST)
    (server.home / "seg.bin").write_bytes(data)
    run(["lftp", "-c", "set ftp:ssl-allow no; "
         f"open -u alice,secret ftp://127.0.0.1:{server.ftp_port}; "
         "pget -n 4 seg.bin -o seg.bin"], cwd=tmp_path, timeout=120)
    assert (tmp_path / "seg.bin").read_bytes() == data
    # lftp over HTTP
    run(["lftp", "-c", f"open http://127.0.0.1:{server.http_port}; get moved.bin -o h.bin"],
        cwd=tmp_path, timeout=60)
    assert (tmp_path / "h.bin").read_bytes() == data[:100_000]
