"""Fault test: the dashboard's JSON API under a schema-driven fuzzer (schemathesis, Hypothesis)
against its own OpenAPI document. The real app on a fresh embedded-PostgreSQL database per
operation, with one stored campaign so that ids can hit; the token is sent, so mutating
operations run too.

Bounded for CI: MAX_EXAMPLES generated cases per operation (about 15 operations), no
shrinking beyond Hypothesis' default budget; the whole module takes well under a minute on
an idle machine. Checks: no 5xx, every error (4xx) a JSON body with a non-empty ``detail``
naming the problem, and 2xx answers matching the documented response schema."""
from __future__ import annotations

import pytest
import schemathesis  # noqa: E402 - in the test extra (pip install -e '.[test]')
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.specs.openapi.checks import response_schema_conformance  # noqa: E402

from dashboard.app import create_app  # noqa: E402
from dashboard.settings import DashboardSettings  # noqa: E402
from tests.dashboard.conftest import TOKEN  # noqa: E402

MAX_EXAMPLES = 12

# One app for the module (the schema is read from it at import, through ASGI: no socket, no
# database needed); each operation's test points it at a fresh database (fixture below).
# schemathesis.pytest.from_fixture would be the natural way, but it fails under pytest 9
# (it reads the private Function._nodeid).
APP = create_app(DashboardSettings(api_token=TOKEN), engine=None)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture
def fuzz_db(engine, store_campaign):
    """Point the module's app at this test's fresh database, with one stored campaign."""
    store_campaign([{"name": "pyftpdlib", "version": "2.2.0"}], {(0, "retr"): [1000] * 4, (0, "login"): [0.1] * 4})
    APP.state.engine = engine
    yield
    APP.state.engine = None


def _problem(response) -> str | None:
    """None when ``response`` is acceptable, else what is wrong with it."""
    if response.status_code >= 500:
        return f"server error {response.status_code}: {response.text[:500]}"
    if response.status_code >= 400:
        if "application/json" not in response.headers.get("content-type", [""])[0]:
            return f"{response.status_code} without a JSON body: {response.headers.get('content-type')}"
        try:
            detail = response.json().get("detail")
        except (ValueError, AttributeError):
            return f"{response.status_code} body is not a JSON object: {response.text[:300]}"
        if not isinstance(detail, str) or not detail.strip():
            return f"{response.status_code} without a 'detail' naming the problem: {response.text[:300]}"
    return None


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_api_fuzz(case, fuzz_db):
    response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
    problem = _problem(response)
    assert problem is None, f"{case.method} {case.formatted_path} {case.query or ''}: {problem}"
    if response.status_code < 300:
        case.validate_response(response, checks=[response_schema_conformance])
