"""Regression detection (runner.history) on real PostgreSQL rows."""
from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from runner.history import SeriesKey, find_regressions, list_series, series_points

DEV = {"name": "pyftpdlib", "version": "2.2.0", "label": "pyftpdlib-dev"}


def _dev(variant=None):
    return {**DEV, "variant": variant or {}}


def test_series_points_and_regression(engine, store_campaign):
    c1 = store_campaign([_dev()], {(0, "retr"): [1000, 1010, 990, 1005], (0, "login"): [0.10, 0.11, 0.10, 0.12]})
    c2 = store_campaign([_dev({"use_sendfile": False})],
                        {(0, "retr"): [600, 610, 590, 605], (0, "login"): [0.10, 0.12, 0.11, 0.10]})
    c3 = store_campaign([_dev()], {(0, "retr"): [1000, 1020, 995, 1001], (0, "login"): [0.2, 0.21, 0.22, 0.2]},
                        env_class="envB")
    with Session(engine) as s:
        series = list_series(s)
        assert {(x["track"], x["workload"], x["points"]) for x in series} == {
            ("pyftpdlib-dev", "retr", 3), ("pyftpdlib-dev", "login", 3)}
        key = SeriesKey("pyftpdlib", "pyftpdlib-dev", "retr", series[0]["params_key"] if series[0]["workload"] == "retr"
                        else series[1]["params_key"])
        pts = series_points(s, key=key)
        assert [p.campaign_id for p in pts] == [c1, c2, c3]
        assert pts[0].summary.median == pytest.approx(1002.5) and pts[0].env_class == "envA"
        changes = find_regressions(s)
    kinds = {(c.key.workload, c.before.campaign_id, c.after.campaign_id): c.kind for c in changes}
    # c1 -> c2: RETR 40% slower, Mann-Whitney p = 0.029 (4 vs 4, all apart): a regression
    assert kinds[("retr", c1, c2)] == "regression"
    # c2 -> c3: the environment changed: marked, not compared (even though RETR got faster and login slower)
    assert kinds[("retr", c2, c3)] == "env_changed" and kinds[("login", c2, c3)] == "env_changed"
    assert ("login", c1, c2) not in kinds  # no significant change
    reg = next(c for c in changes if c.kind == "regression")
    assert reg.p_value < 0.05 and reg.effect == pytest.approx(1002.5 / 602.5 - 1, rel=1e-3)
    assert reg.as_dict()["before"]["campaign_id"] == c1


def test_thresholds_are_configurable(engine, store_campaign):
    store_campaign([_dev()], {(0, "retr"): [1000, 1001, 1002, 1003], (0, "login"): [0.1] * 4})
    store_campaign([_dev()], {(0, "retr"): [980, 981, 982, 983], (0, "login"): [0.1] * 4})
    with Session(engine) as s:
        # 2% slower, significant by the test, but below the default 5% minimum effect
        assert find_regressions(s) == []
        got = find_regressions(s, min_effect=0.01)
        assert [c.kind for c in got] == ["regression"]
        assert find_regressions(s, min_effect=0.01, alpha=0.01) == []  # p = 0.029
        with pytest.raises(ValueError):
            find_regressions(s, alpha=0)


def test_history_api_and_pages(client, store_campaign):
    store_campaign([_dev()], {(0, "retr"): [1000, 1010, 990, 1005], (0, "login"): [0.1] * 4})
    store_campaign([_dev({"use_sendfile": False})], {(0, "retr"): [600, 610, 590, 605], (0, "login"): [0.1] * 4})
    series = client.get("/api/history/series").json()
    retr = next(x for x in series if x["workload"] == "retr")
    d = client.get("/api/history", params={k: retr[k] for k in ("server", "track", "workload", "params_key")}).json()
    assert len(d["points"]) == 2 and d["changes"][0]["kind"] == "regression" and d["unit"] == "MiB/s"
    r = client.get("/api/regressions").json()
    assert [c["kind"] for c in r["changes"]] == ["regression"] and r["alpha"] == 0.05
    html = client.get("/regressions").text
    assert "kind-regression" in html and "/compare?a=1" in html
    assert client.get("/history/series", params={k: retr[k] for k in ("server", "track", "workload",
                                                                      "params_key")}).status_code == 200
