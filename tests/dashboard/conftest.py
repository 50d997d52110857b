"""Dashboard test fixtures: the FastAPI app on the real test PostgreSQL, a helper that
stores campaigns with given sample values (real rows through the store helpers), and the
browser tests' fixtures: the app served by uvicorn, a real worker, headless Chromium."""
from __future__ import annotations

import random
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.browser import chromium
from tests.support.ports import free_port

TOKEN = "test-token-123"
ROOT = Path(__file__).resolve().parents[2]
#: The token of the app the browser tests serve.
BROWSER_TOKEN = "browser-token"

MIB = 1 << 20
#: A server label that would be markup if a page or script inserted it as HTML.
EVIL = '<img src=x onerror="document.title=1">'

SMALL = {"clients": 10, "file_size": "256K", "transfer_size": "4M", "duration": 0.2, "op_timeout": 20,
         "phase_timeout": 60}


def _hist(ms: float, n: int) -> str:
    """An encoded HDR histogram (runner.load.hdr) of ``n`` values of ``ms`` milliseconds."""
    from runner.load import hdr

    h = hdr.new_histogram()
    for _ in range(n):
        hdr.record_s(h, ms / 1000)
    return hdr.encode(h)


@pytest.fixture(autouse=True)
def sources_allowed_in_tmp(tmp_path, monkeypatch) -> Path:
    """The test's own folder is the one folder the operator allowed server sources in
    (``XFERLAB_SOURCE_DIRS``, runner.spec.source_policy): the bisect form's repositories are
    made there. Returns it."""
    monkeypatch.setenv("XFERLAB_SOURCE_DIRS", str(tmp_path))
    monkeypatch.delenv("XFERLAB_SOURCE_URLS", raising=False)
    return tmp_path


@pytest.fixture
def app(engine):
    """The dashboard app on the test database, with token TOKEN."""
    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings

    return create_app(DashboardSettings(api_token=TOKEN), engine=engine)


@pytest.fixture
def client(app) -> Iterator:
    """A TestClient (no auth header)."""
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield c


@pytest.fixture
def auth() -> dict[str, str]:
    """Headers carrying the token."""
    return {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def store_campaign(engine) -> Callable[..., int]:
    """``store_campaign(servers, values, workloads=("retr", "login"), env_class="envA", repeats=4,
    cpu_cost=True)``
    creates a campaign through runner.store.campaigns and finishes every cell as ``done``
    with the primary metric from ``values[(server index, workload)]`` (a list, one per repeat),
    plus memory samples with a timeline and the server and client CPU per unit of work
    (per operation for logins and QUITs, else per GiB; 1% noise; not with ``cpu_cost=False``).
    Returns the campaign id."""
    from sqlalchemy.orm import Session

    from runner.catalogue.workloads import WORKLOADS
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    def make(servers: list[dict], values: dict, workloads=("retr", "login"), env_class: str = "envA",
             repeats: int = 4, name: str = "seeded", cpu_cost: bool = True) -> int:
        spec = parse_spec({"name": name, "repeats": repeats, "servers": servers, "backend": "local",
                           "workloads": [{"name": w, "params": SMALL} for w in workloads]})
        with Session(engine, expire_on_commit=False) as s:
            camp = crud.create_campaign(s, spec=spec, backend="local")
            s.commit()
            env = crud.get_or_create_environment(s, data={"kernel": env_class}, env_class=env_class)
            cells = list(s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq))
            labels = list(dict.fromkeys(c.server_label for c in cells))
            rnd = random.Random(camp.id)
            for c in cells:
                c.status = "running"
                c.started_at = crud.now()
                idx = labels.index(c.server_label)
                v = values[(idx, c.workload)][c.repeat]
                info = WORKLOADS[c.workload]
                samples = [Sample(metric=info.primary, stat="value", value=v, unit=info.unit),
                           Sample(metric="errors", stat="total", value=0.0, unit="count")]
                for stat, mem in (("start", 5e6), ("peak", 9e6 + idx * 1e6), ("end", 8e6)):
                    raw = [[t * 0.1, 5e6 + t * 1e5, 4e6 + t * 1e5, 1] for t in range(20)] if stat == "peak" else None
                    samples.append(Sample(metric="server_mem_uss", stat=stat, value=mem * (1 + rnd.random() / 100),
                                          unit="bytes", raw=raw))
                    samples.append(Sample(metric="server_mem_rss_minus_shared", stat=stat, value=mem * 0.9,
                                          unit="bytes"))
                if cpu_cost:
                    per, unit = ("op", "us/op") if c.workload in ("login", "quit") else ("gib", "s/GiB")
                    cost = (40.0 if per == "op" else 0.3) * (1 + idx / 10)
                    samples += [Sample(metric=f"server_cpu_per_{per}", stat="value",
                                       value=cost * (1 + rnd.random() / 100), unit=unit),
                                Sample(metric=f"client_cpu_per_{per}", stat="value", value=cost * 2, unit=unit)]
                crud.finish_cell(s, cell=c, status="done", samples=samples, environment=env)
            return camp.id

    return make


@pytest.fixture
def fair_campaign(engine) -> Callable[..., int]:
    """``fair_campaign(label=None)`` stores a campaign of one server, ``retr_concurrent`` with
    4 clients and 2 repeats, and ``login`` (1 repeat each, no per-client list): repeat 0 was
    stored as older cells were (only ``jain``, carrying the list), repeat 1 with
    every fairness sample of runner.cell.samples. Repeat 0's clients ran at 4, 2, 1, 1 MiB/s, repeat
    1's all at 2 MiB/s. Returns the campaign id."""
    from sqlalchemy.orm import Session

    from runner.cell.samples import fairness_samples
    from runner.load.result import ClientFigures, PhaseResult
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    def make(label: str | None = None) -> int:
        server = {"name": "pyftpdlib", "version": "2.2.0", **({"label": label} if label else {})}
        spec = parse_spec({"name": "fairness", "repeats": 2, "backend": "local", "servers": [server],
                           "workloads": [{"name": "retr_concurrent", "params": {"clients": 4, "file_size": "4M"}},
                                         {"name": "login", "params": {"clients": 4}}]})
        with Session(engine, expire_on_commit=False) as s:
            camp = crud.create_campaign(s, spec=spec, backend="local")
            s.commit()
            for c in s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq):
                c.status, c.started_at = "running", crud.now()
                samples = [Sample(metric="elapsed", stat="value", value=8.0, unit="s")]
                if c.workload == "retr_concurrent" and c.repeat == 0:
                    raw = [[4 * MIB, 1.0, True], [4 * MIB, 2.0, True], [4 * MIB, 4.0, True], [8 * MIB, 8.0, True]]
                    samples.append(Sample(metric="fairness", stat="jain", value=64 / 88, unit="ratio", raw=raw))
                elif c.workload == "retr_concurrent":
                    r = PhaseResult(workload="retr_concurrent", elapsed_s=2.0, bytes=16 * MIB, ops=4,
                                    clients=[ClientFigures(4 * MIB, 2.0)] * 4)
                    samples += fairness_samples(r, http=False)
                crud.finish_cell(s, cell=c, status="done", samples=samples)
            return camp.id

    return make


@pytest.fixture
def sweep_campaign(engine) -> Callable[..., int]:
    """``sweep_campaign(label=None)`` stores a saturation sweep: one server, ``retr_sustained``
    at 1, 2, 4, 8 clients, 2 repeats, with the sample rows runner.cell.samples makes of a
    PhaseResult (HDR histograms, users at rate R = 1 MiB/s): throughput 10, 20, 40, 41
    MiB/s, every operation 2 ms but at N = 8 5 ms (p99 doubled: the knee is N = 4); each
    client at 10 MiB/s but at N = 8 three of them at 0.5 MiB/s. Returns the campaign id."""
    from sqlalchemy.orm import Session

    from runner.cell.samples import phase_samples
    from runner.load.result import ClientFigures, PhaseResult
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell

    def make(label: str | None = None) -> int:
        server = {"name": "tpd", **({"label": label} if label else {})}
        spec = parse_spec({"name": "sweep", "repeats": 2, "backend": "local", "servers": [server],
                           "workloads": [{"name": "retr_sustained",
                                          "params": {"clients": [1, 2, 4, 8], "duration": 1, "file_size": "1M"}}]})
        with Session(engine, expire_on_commit=False) as s:
            camp = crud.create_campaign(s, spec=spec, backend="local")
            s.commit()
            for c in s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq):
                c.status, c.started_at = "running", crud.now()
                n = c.params["clients"]
                total = {1: 10, 2: 20, 4: 40, 8: 41}[n] * MIB
                rates = [10 * MIB] * n if n < 8 else [0.5 * MIB] * 3 + [(total - 1.5 * MIB) / 5] * 5
                r = PhaseResult(workload="retr_sustained", elapsed_s=1.0, bytes=total, ops=total // MIB,
                                clients=[ClientFigures(int(x), 1.0) for x in rates], user_rate=MIB,
                                histograms={"latency": _hist(5.0 if n == 8 else 2.0, 50),
                                            "service": _hist(2.0, 50)})
                crud.finish_cell(s, cell=c, status="done", samples=phase_samples(r))
            return camp.id

    return make


def run_worker_once(engine, spec, env: dict[str, str]) -> tuple[int, subprocess.CompletedProcess[str]]:
    """Queue a campaign of ``spec`` (a CampaignSpec; local backend) in ``engine``'s database
    and run ``xferlab worker --once`` as a subprocess with environment ``env`` (the
    ``xferlab_env`` fixture's: XFERLAB_DATABASE_URL of that database). Returns (the
    campaign's id, the finished process with its text stdout and stderr); at most 300 s
    (subprocess.TimeoutExpired past that)."""
    import sys

    from sqlalchemy.orm import Session

    from runner.store import campaigns as crud

    with Session(engine) as s:
        cid = crud.create_campaign(s, spec=spec, backend="local").id
        s.commit()
    p = subprocess.run([sys.executable, "-m", "runner.cli", "worker", "--once", "--poll", "0.2"], env=env,
                       capture_output=True, text=True, timeout=300)
    return cid, p


@contextmanager
def served(app) -> Iterator[int]:
    """Serve ``app`` with a real uvicorn on 127.0.0.1 in a thread; yields the port. Waits
    at most 20 s for the start and 10 s for the shutdown (asserting both)."""
    import threading
    import time

    import uvicorn

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    deadline = time.monotonic() + 20
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    try:
        yield port
    finally:
        srv.should_exit = True
        th.join(10)
    assert not th.is_alive(), "uvicorn did not shut down within 10 s"


@pytest.fixture
def live(app) -> Iterator[tuple[str, int]]:
    """The app served by a real uvicorn on 127.0.0.1 (a thread); yields ``(host, port)``."""
    with served(app) as port:
        yield "127.0.0.1", port


@pytest.fixture
def server(engine):
    """The dashboard (token :data:`BROWSER_TOKEN`) on 127.0.0.1:PORT (uvicorn in a thread);
    yields the base URL."""
    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings

    app = create_app(DashboardSettings(api_token=BROWSER_TOKEN), engine=engine)
    with served(app) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def worker(xferlab_env, tmp_path):
    """A real ``python -m runner.cli worker`` process on the test database; SIGTERM at the end."""
    log = open(tmp_path / "worker.log", "w")
    p = subprocess.Popen([sys.executable, "-m", "runner.cli", "worker", "--poll", "0.5"], env=xferlab_env,
                         cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    yield p
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait(10)
    log.close()
    print((tmp_path / "worker.log").read_text()[-3000:])
    assert rc == 0, f"worker exited {rc}"


@pytest.fixture
def browser():
    """Debian's headless Chromium through Playwright (tests.support.browser); closed at the end."""
    yield from chromium()


@pytest.fixture
def capacity_campaign(engine) -> Callable[..., int]:
    """``capacity_campaign(label=None)`` runs a capacity search (runner.campaign.capacity)
    over stored cells of a server that keeps K = 3 users at 1 MiB/s each: each step's cell
    gets the sample rows runner.cell.samples makes of a PhaseResult whose clients each moved
    1.2 MiB/s up to N = 3 and 3.3 MiB/s shared by all above (p99 2 ms, then 50 ms); the
    search queues the steps (1, 2, 4, 3, then 3 again) and stores its answer. Returns the
    campaign id."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from runner.campaign.capacity import after_step
    from runner.cell.samples import phase_samples
    from runner.load.result import ClientFigures, PhaseResult
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell

    def make(label: str | None = None) -> int:
        server = {"name": "tpd", **({"label": label} if label else {})}
        spec = parse_spec({"name": "capacity", "repeats": 1, "backend": "local", "servers": [server],
                           "workloads": [{"name": "retr_sustained", "params": {"duration": 1, "file_size": "64K"},
                                          "capacity": {"user_rate": "1M"}}]})
        with Session(engine, expire_on_commit=False) as s:
            camp = crud.create_campaign(s, spec=spec, backend="local")
            s.commit()
            for _ in range(20):
                c = s.scalars(select(Cell).where(Cell.campaign_id == camp.id, Cell.status == "queued")
                              .order_by(Cell.seq)).first()
                if c is None:
                    break
                c.status, c.started_at = "running", crud.now()
                n = c.params["clients"]
                rate = 1.2 * MIB if n <= 3 else 3.3 * MIB / n
                r = PhaseResult(workload="retr_sustained", elapsed_s=1.0, bytes=int(rate * n), ops=n * 16,
                                clients=[ClientFigures(int(rate), 1.0) for _ in range(n)], user_rate=MIB,
                                histograms={"latency": _hist(2.0 if n <= 3 else 50.0, 50), "service": _hist(2.0, 50)})
                crud.finish_cell(s, cell=c, status="done", samples=phase_samples(r),
                                 then=lambda ss, cc: after_step(ss, cc, spec))
            return camp.id

    return make
