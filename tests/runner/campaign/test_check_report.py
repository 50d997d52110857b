"""``xferlab check``'s verdicts, Markdown and JUnit on plain campaign data (runner.campaign.check):
the reference p-values are the exact Mann-Whitney U ones counted by hand, 2/C(8,4) = 2/70 for
two wholly separated samples of 4, 2/C(10,5) = 2/252 for 5; Benjamini-Hochberg over m figures
multiplies the smallest p by m (then takes running minima from the largest)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from runner.campaign.check import junit, markdown, run_check
from runner.campaign.gate import min_effect_for
from runner.report.data import CampaignData, Series, WorkloadFacts

FACTS = {"retr_concurrent": WorkloadFacts("4 concurrent clients (RETR 64K file)", "elapsed", "s", False),
         "retr": WorkloadFacts("RETR (server -> client)", "throughput", "MiB/s", True)}


def _data(cid: int, label: str, elapsed: tuple[float, ...], mibs: tuple[float, ...], env: str = "e1") -> CampaignData:
    return CampaignData(cid, "gate", [label], [
        Series(label, "retr_concurrent", FACTS["retr_concurrent"].title, "elapsed", "s", False, elapsed, "k1"),
        Series(label, "retr", FACTS["retr"].title, "throughput", "MiB/s", True, mibs, "k2"),
        Series(label, "retr", FACTS["retr"].title, "server_mem_uss", "bytes", False, (1.0, 2.0, 3.0, 4.0), "k2",
               "peak")], environment={"env_class": env}, workloads=FACTS)


def test_a_separated_slower_sample_is_a_regression_and_the_rest_is_not():
    base = _data(1, "pyftpdlib @aaa", (0.010, 0.011, 0.012, 0.013, 0.0115), (1000.0, 1010.0, 990.0, 1005.0, 1002.0))
    cand = _data(2, "pyftpdlib @bbb", (0.20, 0.21, 0.22, 0.23, 0.215), (1001.0, 1009.0, 991.0, 1004.0, 1003.0))
    res = run_check(base, cand, baseline_what="aaa", candidate_what="bbb", min_effect=0.05)
    assert [v.name for v in res.verdicts] == ["4 concurrent clients (RETR 64K file) elapsed",
                                              "RETR (server -> client) throughput"]  # memory only on request
    slow, same = res.verdicts
    assert slow.regression and not slow.improvement
    assert slow.p_value == pytest.approx(2 / 252) and slow.q_value == pytest.approx(2 * 2 / 252)
    assert slow.change == pytest.approx(0.215 / 0.0115 - 1)
    assert not same.regression and not same.improvement and same.p_value > 0.5
    assert res.failed
    md = markdown(res)
    assert md.startswith("## :x: xferlab check: regression\n")
    assert ("| 4 concurrent clients (RETR 64K file) elapsed | 0.0115 s (n=5) | 0.215 s (n=5) | +1769.6% | 0.00794 "
            "| 0.0159 | 5.0% | **regression** |") in md
    suite = ET.fromstring(junit(res).split("\n", 1)[1]).find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"
    assert [c.find("failure") is not None for c in suite.findall("testcase")] == [True, False]


def test_with_several_figures_the_false_discovery_rate_is_controlled():
    base = _data(1, "a", (0.010, 0.011, 0.012, 0.013), (100.0, 101.0, 102.0, 103.0))
    cand = _data(2, "b", (0.20, 0.21, 0.22, 0.23), (100.5, 101.5, 102.5, 103.5))
    res = run_check(base, cand, baseline_what="a", candidate_what="b", min_effect=0.05)
    slow = res.verdicts[0]
    # p = 2/70 alone would pass; over 2 figures its q is at least 2/70 * 2 > 0.05
    assert slow.p_value == pytest.approx(2 / 70) and slow.q_value > 0.05 and not slow.regression


def test_a_small_significant_change_below_the_minimum_effect_passes():
    base = _data(1, "a", (1.00, 1.01, 1.02, 1.03, 1.02), (100.0,) * 5)
    cand = _data(2, "b", (1.06, 1.07, 1.08, 1.09, 1.065), (100.0,) * 5)  # +4.9%, p = 2/252, q = 4/252
    res = run_check(base, cand, baseline_what="a", candidate_what="b", min_effect=0.05)
    assert res.verdicts[0].change == pytest.approx(1.07 / 1.02 - 1)
    assert res.verdicts[0].q_value == pytest.approx(4 / 252) and not res.failed
    assert run_check(base, cand, baseline_what="a", candidate_what="b", min_effect=0.03).failed
    assert markdown(res).startswith("## :white_check_mark: xferlab check: no regression")


def test_a_faster_candidate_is_an_improvement_and_other_environments_are_named():
    base = _data(1, "a", (0.20, 0.21, 0.22, 0.23), (100.0, 101.0, 102.0, 103.0))
    cand = _data(2, "b", (0.010, 0.011, 0.012, 0.013), (200.0, 201.0, 202.0, 203.0), env="e2")
    res = run_check(base, cand, baseline_what="a", candidate_what="b", min_effect=0.05)
    assert [v.improvement for v in res.verdicts] == [True, True] and not res.failed
    assert "different environment classes (e1 vs e2" in markdown(res)


def test_a_figure_the_candidate_did_not_measure_fails_the_check():
    base = _data(1, "a", (0.01, 0.01, 0.02, 0.02), (100.0, 101.0, 102.0, 103.0))
    cand = _data(2, "b", (0.01, 0.01, 0.02, 0.02), (100.0,))
    cand.series[:] = cand.series[:1]
    cand.failures.append(("b", "retr", 0, "pyftpdlib at 1234: pip install failed (exit 1):\nerror"))
    res = run_check(base, cand, baseline_what="a", candidate_what="b", min_effect=0.05)
    assert res.failed and res.missing == ["RETR (server -> client) throughput: pyftpdlib at 1234: pip install "
                                          "failed (exit 1):"]
    assert "**not measured**" in markdown(res)


def test_campaigns_of_other_specs_are_refused():
    base = _data(1, "a", (0.01,), (100.0,))
    other = CampaignData(2, "x", ["b"], [Series("b", "login", "t", "elapsed", "s", False, (1.0,), "z")],
                         workloads=FACTS)
    with pytest.raises(ValueError, match="share no figure"):
        run_check(base, other, baseline_what="1", candidate_what="b", min_effect=0.05)


def test_min_effect_for_is_the_given_default_until_calibrated():
    assert min_effect_for("elapsed", "e1", 0.07) == 0.07 and min_effect_for("throughput", None) == 0.05
