"""The stored-file check of http_upload cells (runner.cell.upload_check, seed 002's
``ls | wc -l``): a server that answers 201 without writing fails its cell with both
numbers; a server that stores every upload passes and its uploads are deleted after."""
from __future__ import annotations

from pathlib import Path

from runner.backends.base import list_stored_files, remove_stored_files
from runner.catalogue.workloads import WorkloadParams
from runner.cell.local import run_local_cell
from runner.cell.upload_check import UploadCheck, slack
from runner.load.result import PhaseResult
from runner.load.target import Target
from runner.spec.model import parse_spec
from runner.store.models import Cell
from tests.runner.support import FixedBackend, RunningHandle
from tests.support.httpserver import HttpTestServer


class _Handle(RunningHandle):
    """A running tests/support/httpserver.py as a ServerHandle, with its stored files."""

    def __init__(self, home: Path, port: int) -> None:
        super().__init__(Target("127.0.0.1", 0, "xferlab", "", home, http_port=port), "go-http")
        self.home = home

    def stored_files(self, subdir: str = "uploads") -> list[tuple[str, int]]:
        return list_stored_files(self.home / subdir)

    def remove_stored(self, subdir: str, names: list[str]) -> None:
        remove_stored_files(self.home / subdir, names)


def _run(tmp_path: Path, mode: str, warmup: bool = False, served: list | None = None):
    spec = parse_spec({"name": "u", "repeats": 1, "warmup": warmup, "driver": "xferlab-http",
                       "servers": [{"name": "go-http"}],
                       "workloads": [{"name": "http_upload", "params": {"clients": 2, "duration": 0.3,
                                                                         "body_size": 100}}]})
    params = spec.workloads[0].params
    cell = Cell(id=1, seq=0, server="go-http", server_label="go-http",
                server_spec=spec.servers[0].model_dump(mode="json"), workload="http_upload",
                params=params.model_dump(mode="json"), params_key="", repeat=0)
    (tmp_path / "uploads").mkdir(exist_ok=True)
    (tmp_path / "uploads" / "earlier.bin").write_bytes(b"x" * 7)  # a reused server's earlier upload
    with HttpTestServer(tmp_path, mode=mode) as srv:
        out = run_local_cell(cell, spec, FixedBackend(_Handle(tmp_path, srv.port)))
    if served is not None:
        served.append(srv)
    return out


def _rows(outcome) -> dict[str, float]:  # noqa: ANN001
    return {s.stat: s.value for s in outcome.samples if s.metric == "stored_files"}


def test_server_answering_201_without_writing_fails_the_cell(tmp_path):
    out = _run(tmp_path, "nowrite")
    n = out.result.successful
    assert n > 0 and out.status == "failed"
    assert out.error == f"server answered 2xx to {n:,} uploads but stored 0 files of 100 bytes"
    assert _rows(out) == {"before": 1.0, "new": 0.0, "new_right_size": 0.0, "expected": float(n), "slack": 0.0}


def test_server_dropping_every_third_upload_fails_the_cell(tmp_path):
    """A server that answers 201 to every upload but writes only two of every three: the
    cell fails, naming the 2xx count and the files actually written (xferlab-http leaves
    nothing in flight, so the counts must be equal and a third are missing)."""
    served: list = []
    out = _run(tmp_path, "dropthird", served=served)
    n, written = out.result.successful, served[0].written
    assert served[0].uploads == n and n >= 3 and written == n - n // 3
    assert out.status == "failed"
    assert out.error == f"server answered 2xx to {n:,} uploads but stored {written:,} files of 100 bytes"
    assert _rows(out) == {"before": 1.0, "new": float(written), "new_right_size": float(written),
                          "expected": float(n), "slack": 0.0}


def test_server_storing_every_upload_passes_and_its_uploads_are_deleted(tmp_path):
    out = _run(tmp_path, "write")
    n = out.result.successful
    assert out.status == "done", out.error
    assert _rows(out) == {"before": 1.0, "new": float(n), "new_right_size": float(n), "expected": float(n),
                          "slack": 0.0}
    assert [p.name for p in (tmp_path / "uploads").iterdir()] == ["earlier.bin"]  # only the phase's were deleted
    assert any(s.metric == "cell_time" and s.stat == "files" for s in out.samples)


def test_warmup_uploads_are_deleted_before_the_phase(tmp_path):
    out = _run(tmp_path, "write", warmup=True)
    n = out.result.successful
    assert out.status == "done", out.error
    assert _rows(out)["before"] == 1.0 and _rows(out)["new"] == float(n)  # only earlier.bin was there
    assert [p.name for p in (tmp_path / "uploads").iterdir()] == ["earlier.bin"]


class _Listed:
    def __init__(self, before: list[tuple[str, int]], after: list[tuple[str, int]]) -> None:
        self.lists = [before, after]

    def stored_files(self, subdir: str = "uploads") -> list[tuple[str, int]]:
        return self.lists.pop(0)


def _check(before, after, successful, unfinished=0, failed=0, clients=4):  # noqa: ANN001
    params = WorkloadParams(clients=clients, body_size=10)
    c = UploadCheck(_Listed(before, after), params)
    c.start()
    r = PhaseResult("http_upload", 1.0, successful=successful, unfinished=unfinished, network_failed=failed)
    return c.finish(r)


def test_slack_allows_in_flight_and_failed_uploads_only():
    files = [(f"f{i}", 10) for i in range(5)]
    assert _check([], files, 5) is None
    assert _check([], files, 4) == ("server answered 2xx to 4 uploads but stored 5 new files "
                                    "(at most 4 expected: 0 in flight or failed)")
    assert _check([], files, 4, unfinished=1) is None  # h2load: started - done
    assert _check([], files, 3, unfinished=None) is None  # wrk cannot tell: one per connection
    assert _check([], files[:3] + [("short", 4)], 3, failed=1) is None  # a cut-short upload
    assert _check([], files[:3] + [("short", 4)], 4) == \
        "server answered 2xx to 4 uploads but stored 3 files of 10 bytes (1 new files of another size)"
    assert slack(PhaseResult("http_upload", 1.0, unfinished=None, network_failed=2), WorkloadParams(clients=7)) == 9
