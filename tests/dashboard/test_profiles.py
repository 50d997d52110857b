"""The dashboard's flame graph pages over real profiles (tests/support/real_profile.py),
through the app on the test PostgreSQL: the campaign page links each profiled cell, the
cell page shows profiler, rate, the on/off-CPU split and the syscall table beside the
embedded SVG, the SVG is its own document under a strict CSP, the compare page embeds the
differential graph and the regressions page links a regression to it."""
from __future__ import annotations

import re

import pytest

from tests.support.real_profile import record, store_profiled_campaign, svg_frames


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("perf")
    return {"a": record(d, "a")[0], "b": record(d, "b")[0]}


def test_campaign_cell_and_svg_pages(client, engine, profiles):
    pa = profiles["a"]
    cid, ids = store_profiled_campaign(engine, {"hash-heavy": pa, "copy-heavy": profiles["b"], "plain": None})
    page = client.get(f"/campaigns/{cid}").text
    links = re.findall(r'class="profile-link" href="/cells/(\d+)/profile"', page)
    assert links == [str(ids["hash-heavy"]), str(ids["copy-heavy"])]
    assert "Server CPU profiles" in page and f"perf {pa.profiler_version}" in page

    cell = client.get(f"/cells/{ids['hash-heavy']}/profile")
    assert cell.status_code == 200
    assert f'<span id="rate">{pa.rate_hz} Hz</span>' in cell.text
    assert f'<span id="profiler">perf {pa.profiler_version}</span>' in cell.text
    assert f"<td>write</td><td class=\"num\">{pa.syscalls[0].count}</td>" in cell.text
    assert f"{pa.on_cpu_s:.3f} s" in cell.text and "not measured" in cell.text  # no off-CPU in this profile
    assert f'src="/cells/{ids["hash-heavy"]}/flamegraph.svg?width=900"' in cell.text

    svg = client.get(f"/cells/{ids['hash-heavy']}/flamegraph.svg")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    csp = svg.headers["content-security-policy"]
    assert csp.startswith("default-src 'none'; script-src 'unsafe-hashes' 'sha256-")
    assert "'unsafe-inline'" not in csp.split("style-src")[0]  # scripts by hash only
    assert svg.headers["x-content-type-options"] == "nosniff"
    assert any(f["name"] == "xfl_hash_block" for f in svg_frames(svg.text))

    assert client.get(f"/cells/{ids['plain']}/profile").status_code == 404
    assert "has no profile" in client.get(f"/cells/{ids['plain']}/flamegraph.svg").text
    assert client.get(f"/cells/{ids['hash-heavy']}/flamegraph.svg?kind=off").status_code == 404
    assert client.get("/cells/0/profile").status_code == 422
    assert client.get(f"/cells/{ids['hash-heavy']}/flamegraph.svg?width=99999").status_code == 422
    narrow = client.get(f"/cells/{ids['hash-heavy']}/flamegraph.svg?width=900").text
    assert '<svg version="1.1" width="900"' in narrow


def test_compare_page_embeds_the_differential_graph(client, engine, profiles):
    cid, ids = store_profiled_campaign(engine, {"hash-heavy": profiles["a"], "copy-heavy": profiles["b"]})
    page = client.get(f"/compare?campaign={cid}&a=hash-heavy&b=copy-heavy").text
    srcs = re.findall(r'<iframe class="flamegraph diff-flamegraph" src="([^"]+)"', page)
    assert len(srcs) == 1, page[-3000:]
    svg = client.get(srcs[0].replace("&amp;", "&"))
    assert svg.status_code == 200
    frames = {f["name"]: f for f in svg_frames(svg.text)}
    assert frames["xfl_copy_block"]["delta"] > 5 and frames["xfl_hash_block"]["delta"] < -5


def test_regression_links_to_the_differential_graph(client, engine, profiles):
    """login 60% slower from one campaign to the next, 7 repeats each, every cell profiled:
    the regressions page lists it with a link to the two campaigns' differential graph."""
    before, _ = store_profiled_campaign(engine, {"srv": profiles["a"]}, name="series",
                                        elapsed=[1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01])
    after, _ = store_profiled_campaign(engine, {"srv": profiles["b"]}, name="series",
                                       elapsed=[1.60, 1.61, 1.59, 1.62, 1.58, 1.60, 1.61])
    page = client.get("/regressions").text
    links = re.findall(r'class="flame-link" href="([^"]+)"', page)
    assert len(links) == 1, page[-3000:]
    url = links[0].replace("&amp;", "&")
    assert f"a={before}%3Asrv" in url and f"b={after}%3Asrv" in url
    frames = {f["name"]: f for f in svg_frames(client.get(url).text)}
    assert frames["xfl_copy_block"]["delta"] > 5


def test_missing_inferno_is_named(client, engine, profiles, monkeypatch, tmp_path):
    """Without inferno the SVG answers 503 naming the program and `make install`; the
    cell page still shows the figures."""
    from runner.report import flamegraph

    _, ids = store_profiled_campaign(engine, {"hash-heavy": profiles["a"]})
    monkeypatch.setattr(flamegraph.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    r = client.get(f"/cells/{ids['hash-heavy']}/flamegraph.svg", headers={"accept": "application/json"})
    assert r.status_code == 503
    assert "inferno-flamegraph is not installed: run `make install`" in r.json()["detail"]
    assert client.get(f"/cells/{ids['hash-heavy']}/profile").status_code == 200
