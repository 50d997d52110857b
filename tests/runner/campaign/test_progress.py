"""Progress while a run prepares and measures: image build steps with a counter, the
docker backend building a campaign's images before its first cell, plain lines with a
heartbeat when the output is not a terminal, and ``xferlab servers`` under both
backends. Docker tests skip (with the reason) only when no engine answers."""
from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from runner.catalogue.servers import UNAVAILABLE_SERVERS
from tests.docker_support import SESSION_LABEL

XFERLAB = [sys.executable, "-m", "runner.cli"]
SERVERS = ("pyftpdlib", "twisted", "vsftpd", "proftpd", "pureftpd", "tpd")


# ---------------------------------------------------------------- heartbeat (no engine, no database)

def test_heartbeat_writes_only_when_quiet():
    from runner.campaign.loop import Heartbeat

    lines: list[tuple[float, str]] = []
    hb = Heartbeat(lambda s: lines.append((time.monotonic(), s)), 0.2)
    hb.activity("building image vsftpd 3/7")
    hb.wrote("Step 2/9: RUN apt-get update")
    t0 = time.monotonic()
    with hb:
        time.sleep(1.0)
        n_quiet = len(lines)
        for _ in range(10):  # busy: a line written every 0.05 s, so no heartbeat is due
            hb.wrote()
            time.sleep(0.05)
        n_busy = len(lines) - n_quiet
    assert n_quiet >= 3, lines
    assert n_busy <= 1, lines  # at most one already due when the busy part began
    assert lines[0][0] - t0 < 0.6
    assert re.fullmatch(r"still running: building image vsftpd 3/7 for 0m0\ds \(last: Step 2/9: RUN apt-get update\)",
                        lines[0][1]), lines[0][1]
    gaps = [b[0] - a[0] for a, b in zip(lines, lines[1:])][: n_quiet - 1]
    assert max(gaps) < 0.2 + 0.3, gaps
    with pytest.raises(ValueError, match="interval"):
        Heartbeat(print, 0)


# ---------------------------------------------------------------- plain lines from a real run (database)

@pytest.mark.integration
@pytest.mark.timeout(600)
def test_run_to_a_pipe_prints_a_line_at_least_every_interval(tmp_path: Path, xferlab_env):
    """`xferlab run` with stdout to a pipe (as `make classic | tee`): plain lines, and
    with XFERLAB_PROGRESS_INTERVAL=1 never more than ~1 s without one, also inside a
    4 s measured phase; the fixture being made (by the warm-up) is named with its server."""
    spec = {"name": "heartbeat", "repeats": 1, "backend": "local", "warmup": True,
            "servers": [{"name": "pyftpdlib", "version": "2.2.0"}],
            "workloads": [{"name": "retr", "params": {"transfer_size": "8M", "duration": 4.0}}]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**xferlab_env, "XFERLAB_PROGRESS_INTERVAL": "1", "COLUMNS": "160"}
    p = subprocess.Popen(XFERLAB + ["run", str(path), "--no-pin"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, bufsize=0)
    # Each line is timed when its bytes arrive: the pipe is read with os.read, unbuffered.
    # (A buffered readline after select() keeps the lines that came in one chunk with the
    # first in its buffer, where select() cannot see them: each waited for select's 1 s
    # timeout, a gap the program never left.)
    got: list[tuple[float, str]] = []
    sel = selectors.DefaultSelector()
    assert p.stdout is not None
    fd = p.stdout.fileno()
    sel.register(fd, selectors.EVENT_READ)
    pending = b""
    deadline = time.monotonic() + 500
    try:
        while time.monotonic() < deadline:  # bounded: the deadline
            if not sel.select(timeout=1.0):
                if p.poll() is not None:
                    break
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            now = time.monotonic()
            *lines, pending = (pending + chunk).split(b"\n")
            got.extend((now, line.decode()) for line in lines)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)
    out = "\n".join(s for _, s in got)
    assert p.returncode == 0, out
    i_end = next(i for i, (_, s) in enumerate(got) if s.startswith("campaign 1: done"))
    window = got[:i_end + 1]  # from the first line to the campaign's end (the tables follow at once)
    gaps = [b[0] - a[0] for a, b in zip(window, window[1:])]
    assert window[-1][0] - window[0][0] > 4.0, out  # the phase ran for its 4 s
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    # interval 1 s, 1 s slack for a loaded machine
    assert gaps[worst] < 1.0 + 1.0, (f"{gaps[worst]:.3f} s between\n  {window[worst][1]}\nand\n  "
                                     f"{window[worst + 1][1]}\n{out}")
    assert any("still running: cell 1/1 pyftpdlib 2.2.0 · retr · #1 for 0m0" in s for _, s in window), out
    # the fixture is made by the warm-up (same size), whose messages are shown too
    assert re.search(r"pyftpdlib 2.2.0: warm-up: retr: making fixture 8 MiB \(", out), out
    assert "\x1b[" not in out  # no terminal control sequences in a log
    print(out)


# ---------------------------------------------------------------- image builds (engine)

@pytest.mark.parallel  # the lines printed, in order: no time measured
@pytest.mark.docker
@pytest.mark.timeout(600)
def test_build_image_reports_each_step_in_order(client, tmp_path: Path):
    """A throwaway image (its own tag and context, removed afterwards) built with the
    function that builds the server images: one line per build step, in order."""
    from runner.backends.docker import images

    (tmp_path / "Dockerfile").write_text(f"FROM {images.BASE_TAG}\nRUN true\nCOPY hello /hello\n"
                                         f"RUN cat /hello\nLABEL xferlab.test={SESSION_LABEL}\n")
    (tmp_path / "hello").write_text(uuid.uuid4().hex + "\n")
    tag = f"xferlab-test/progress:{uuid.uuid4().hex[:10]}"
    msgs: list[str] = []
    try:
        iid = images.build_image(client, context=tmp_path, dockerfile="Dockerfile", tag=tag, buildargs={},
                                 labels={"xferlab.test": SESSION_LABEL, "xferlab.extra": 'a "quoted" $HOME value'},
                                 progress=msgs.append, prefix="image t 1/1: ")
        img = client.images.get(tag)
        assert img.id == iid
        assert img.labels.get("xferlab.test") == SESSION_LABEL
        assert img.labels.get("xferlab.extra") == 'a "quoted" $HOME value'  # no variable expanded
    finally:
        try:
            client.images.remove(tag, force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
    assert msgs[0].startswith(f"image t 1/1: building {tag} from "), msgs
    steps = [re.fullmatch(r"image t 1/1: Step (\d+)/(\d+): (.*)", m) for m in msgs if "Step " in m]
    assert all(steps), msgs
    n = int(steps[0].group(2))  # the Dockerfile's five, then the one LABEL line build_image appends for `labels=`
    assert n == 6, msgs
    assert [(int(m.group(1)), int(m.group(2))) for m in steps] == [(i, n) for i in range(1, n + 1)], msgs
    assert [m.group(3) for m in steps][:5] == [f"FROM {images.BASE_TAG}", "RUN true", "COPY hello /hello",
                                               "RUN cat /hello", f"LABEL xferlab.test={SESSION_LABEL}"], msgs
    assert re.fullmatch(rf"image t 1/1: built {re.escape(tag)} \(\S+\) in \d+ s", msgs[-1]), msgs


@pytest.mark.parallel  # the lines printed, in order: no time measured
@pytest.mark.docker
@pytest.mark.timeout(1800)  # may build vsftpd cold
def test_ensure_server_images_counts_each_image_in_order(client):
    from runner.backends.docker import images

    msgs: list[str] = []
    got = images.ensure_server_images([("vsftpd", None), ("nosuch", None), ("vsftpd", None)], client=client,
                                      progress=msgs.append, jobs=1)
    assert list(got) == [("vsftpd", None), ("nosuch", None)]  # duplicates once, in order
    tag, iid, _built = got[("vsftpd", None)]  # type: ignore[misc]
    assert tag == "xferlab/vsftpd:default" and client.images.get(tag).id == iid
    assert isinstance(got[("nosuch", None)], images.ImageError)
    first = [i for i, m in enumerate(msgs) if re.match(r"(building image vsftpd 1/2 |image vsftpd 1/2 ready)", m)]
    last = [i for i, m in enumerate(msgs) if m.startswith("image nosuch 2/2 failed: no image for server 'nosuch'")]
    assert first and last and first[0] < last[0], msgs
    assert images.server_image_state("vsftpd", client=client).state == "ready"


def test_ensure_server_images_builds_two_at_a_time(monkeypatch):
    """jobs=2: two builds are in flight at once (each waits at a barrier for the other;
    a serial loop would time out there), each with a client of its own, the results in
    the order asked, every line prefixed with its image, and a failed build does not
    stop the others."""
    import threading

    from runner.backends.docker.images import build

    class FakeClient:
        closed = 0

        def close(self):
            FakeClient.closed += 1

    barrier = threading.Barrier(2, timeout=10)
    seen: list[tuple[str, object]] = []

    def fake_build(name, version=None, *, client, rebuild, progress):
        seen.append((name, client))
        if name == "nosuch":
            raise build.ImageError("no image for server 'nosuch'")
        if name in ("vsftpd", "proftpd"):
            barrier.wait()  # both in flight, or BrokenBarrierError after 10 s
        progress("step 1/1")
        return f"xferlab/{name}:default", f"sha256:{name}", True

    monkeypatch.setattr(build, "image_exists", lambda client, tag: True)
    monkeypatch.setattr(build, "_client", FakeClient)
    monkeypatch.setattr(build, "server_image_state",
                        lambda name, version=None, client=None: build.ImageState(name, None,
                                                                                 f"xferlab/{name}:default", "missing"))
    monkeypatch.setattr(build, "ensure_server_image", fake_build)
    msgs: list[str] = []
    got = build.ensure_server_images([("vsftpd", None), ("proftpd", None), ("nosuch", None), ("tpd", None)],
                                     client=FakeClient(), progress=msgs.append, jobs=2)
    assert list(got) == [("vsftpd", None), ("proftpd", None), ("nosuch", None), ("tpd", None)]
    assert got[("vsftpd", None)] == ("xferlab/vsftpd:default", "sha256:vsftpd", True)
    assert isinstance(got[("nosuch", None)], build.ImageError)
    assert got[("tpd", None)] == ("xferlab/tpd:default", "sha256:tpd", True)
    assert "image vsftpd 1/4: step 1/1" in msgs and "image tpd 4/4: step 1/1" in msgs
    assert any(m.startswith("image nosuch 3/4 failed: no image for server 'nosuch'") for m in msgs)
    assert len({id(c) for _, c in seen}) == 2 and FakeClient.closed == 2  # one client per thread, closed
    with pytest.raises(ValueError, match="jobs"):
        build.ensure_server_images([("tpd", None)], client=FakeClient(), jobs=0)


def test_ensure_lab_images_builds_both_at_once(monkeypatch):
    """The lab's two images (postgres, app) build at the same time (a barrier both must
    reach), each line prefixed with its tag; a failure is returned, not raised."""
    import threading

    from runner.backends.docker.images import build

    class FakeClient:
        def close(self):
            pass

    barrier = threading.Barrier(2, timeout=10)

    def fake_lab(tag, *, client, rebuild, progress):
        barrier.wait()
        progress("step 1/1")
        if tag == "xferlab/app:latest":
            raise build.ImageError("pip failed")
        return "sha256:" + tag

    monkeypatch.setattr(build, "image_exists", lambda client, tag: True)
    monkeypatch.setattr(build, "_client", FakeClient)
    monkeypatch.setattr(build, "ensure_lab_image", fake_lab)
    msgs: list[str] = []
    got = build.ensure_lab_images(["xferlab/postgres:15", "xferlab/app:latest"], client=FakeClient(),
                                  progress=msgs.append)
    assert list(got) == ["xferlab/postgres:15", "xferlab/app:latest"]
    assert got["xferlab/postgres:15"] == "sha256:xferlab/postgres:15"
    assert isinstance(got["xferlab/app:latest"], build.ImageError)
    assert "xferlab/postgres:15: step 1/1" in msgs and "xferlab/app:latest: failed: pip failed" in msgs


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.timeout(1800)
def test_campaign_builds_its_images_before_the_first_cell(client, engine, monkeypatch):
    """run_campaign with the docker backend: the image of every server is made (or
    found ready) with a counter before the first cell starts, through the reporter."""
    from sqlalchemy.orm import Session

    from runner.campaign.loop import run_campaign
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud

    monkeypatch.setenv("XFERLAB_DOCKER_LABELS", f"xferlab.test={SESSION_LABEL}")
    spec = parse_spec({"name": "prep", "repeats": 1, "backend": "docker", "warmup": False,
                       "servers": [{"name": "vsftpd"}],
                       "workloads": [{"name": "login", "params": {"clients": 3}}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="docker", owner=crud.worker_id())
        s.commit()
        cid = camp.id

    events: list[tuple[str, str]] = []

    class Rec:
        def cell_started(self, cell, index, total):
            events.append(("start", f"{index}/{total}"))

        def cell_finished(self, cell, status, summary):
            events.append(("finish", status))

        def message(self, text):
            events.append(("msg", text))

    assert run_campaign(engine, cid, reporter=Rec()) == 1
    start = events.index(("start", "1/1"))
    before = [t for k, t in events[:start] if k == "msg"]
    assert any(re.match(r"(building image vsftpd 1/1 |image vsftpd 1/1 ready)", t) for t in before), events
    assert events[-1] == ("finish", "done"), events


# ---------------------------------------------------------------- xferlab servers

def _servers(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(XFERLAB + ["servers", *extra], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.docker
@pytest.mark.timeout(1800)
def test_servers_shows_both_backends_with_what_to_run(client, tmp_path: Path):
    from runner.backends.docker import images

    images.ensure_server_image("vsftpd", client=client, progress=print)
    env = {**os.environ, "XFERLAB_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}  # nothing fetched
    t0 = time.monotonic()
    p = _servers(env, "--json")
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["docker_engine"]["answers"] is True and rep["run_backend"] == "docker"
    rows = {r["name"]: r for r in rep["servers"]}
    assert set(SERVERS) <= set(rows)
    for name in SERVERS:
        loc, dk = rows[name]["local"], rows[name]["docker"]
        assert loc["status"] in ("can run", "on first use", "skipped"), loc
        assert dk["status"] in ("ready", "outdated", "missing", "no-base"), dk
        assert dk["tag"] == f"xferlab/{name}:default"
        if dk["status"] != "ready":
            assert f"xferlab images build {name}" in dk["detail"], dk
        assert "runner." not in loc["detail"] + dk["detail"]  # what to run, not a Python call
    vs = rows["vsftpd"]["docker"]
    assert vs["status"] == "ready" and vs["image_id"] == client.images.get("xferlab/vsftpd:default").id
    assert re.match(r"image ready \(xferlab/vsftpd:default, built \d+ (s|min|h|d) ago\)", vs["detail"]), vs
    if rows["vsftpd"]["local"]["status"] == "on first use":  # not installed on this host: fetched into the cache
        assert rows["vsftpd"]["local"]["detail"] == "fetched on first use (or now: xferlab servers --fetch vsftpd)"
    assert took < 30, took  # no build, no download (generous for a loaded 2-core machine)
    assert not (tmp_path / "cache" / "debs").exists()  # nothing fetched
    p = _servers(env)
    assert p.returncode == 0, p.stderr
    assert "local backend" in p.stdout and "docker backend" in p.stdout
    assert "image ready (xferlab/vsftpd:default, built" in p.stdout
    assert "xferlab run uses the docker backend" in p.stdout


@pytest.mark.parallel  # the lines printed, in order: no time measured
def test_servers_without_an_engine_says_so_once(tmp_path: Path):
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "COLUMNS": "200"}
    p = _servers(env, "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["docker_engine"]["answers"] is False, rep["docker_engine"]
    assert "No such file" in rep["docker_engine"]["reason"], rep["docker_engine"]  # the reason, from the SDK
    assert rep["run_backend"] == "local"
    assert {r["docker"]["status"] for r in rep["servers"] if r["name"] not in UNAVAILABLE_SERVERS} == {"no engine"}
    # seed 002's servers that cannot run here: listed, with the reason, on both sides
    gone = {r["name"]: r for r in rep["servers"] if r["name"] in UNAVAILABLE_SERVERS}
    assert set(gone) == {"grizzly", "mordor", "vibe.d"}
    for name, row in gone.items():
        assert row["local"] == row["docker"] == {"status": "not available", "detail": UNAVAILABLE_SERVERS[name]}
    rows = {r["name"]: r for r in rep["servers"]}
    assert rows["tpd"]["protocols"] == ["ftp", "http"] and rows["nginx"]["protocols"] == ["http"]
    assert {"go-http", "nginx", "node-http", "uvicorn"} <= set(rows)
    p = _servers(env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("no Docker engine answers") == 1, p.stdout
    assert "xferlab run uses the local backend" in p.stdout


def test_write_fixture_reports_making_and_how_far(tmp_path: Path, monkeypatch):
    from runner.load.ftp import fixtures

    monkeypatch.setattr(fixtures, "PROGRESS_EVERY", fixtures.BLOCK)  # a line per MiB, for a small file
    msgs: list[str] = []
    path = tmp_path / "xferlab-3145728.bin"
    fixtures.write_fixture(path, 3 * fixtures.BLOCK, msgs.append)
    assert msgs == [f"making fixture 3 MiB ({path})", "fixture xferlab-3145728.bin: 1 MiB/3 MiB",
                    "fixture xferlab-3145728.bin: 2 MiB/3 MiB"], msgs
    assert path.stat().st_size == 3 * fixtures.BLOCK
    msgs.clear()
    fixtures.write_fixture(path, 3 * fixtures.BLOCK, msgs.append)  # reused: nothing made, nothing said
    assert msgs == []
