"""Which test modules may run beside another test (``make test``'s first pass, two
pytest-xdist workers: scripts/test.sh) and which must have the machine to themselves (its
second pass, one process).

A module is in :data:`PARALLEL` when none of its checks compares a wall-clock figure with a
bound that another process's load on the same two CPUs can break: it checks what was stored,
rendered, built, refused or counted (bytes, operations, exit codes, pages), internal
consistency (a phase's elapsed equals the sum of its spans; service time <= latency), or times
against bounds with a margin of several times the figure (a 50 ms-per-RETR slowdown told from
sub-millisecond RETRs, a 120 s cancel bound, a 100 Mbit/s shaped link against loopback).

Every other module runs alone: throughput, latency, CPU and timing figures checked against an
independent reference or a physical bound (the STOR/RETR references, the shaped link's payload
rate within 2%, the coordinated-omission stall, the HTTP known-delay server, the heartbeat's
gaps, profiles' on-CPU time against the cgroup's, the client-bound flag, TLS handshakes against
the standard library's client, the capacity search's known answer). A module that is not listed
runs alone: a new module is safe by default and listed here once its checks are known to be
load-proof (tests/test_parts.py checks that every entry names a module that exists). In a
module that runs alone, a test that measures nothing may carry ``@pytest.mark.parallel``
itself, with the reason beside it (e.g. the refused-input and schema tests of
tests/runner/history/test_calibration.py, whose A/A test runs alone). Modules
whose tests pytest-xdist cannot run one by one stay out too: schemathesis' generated API tests
(tests/dashboard/test_fuzz_api.py) report one outcome for the module there, and the controller
(tests/conftest.py) fails a run where fewer tests report than were collected.
"""
from __future__ import annotations

#: Test modules (paths from the repository root) that run in the parallel pass.
PARALLEL: frozenset[str] = frozenset({
    # provisioning lint
    "tests/ansible/test_lint.py",
    # the dashboard: pages, API, forms, browser layout; the bisect pages' slow commit waits
    # 50 ms per RETR against sub-millisecond RETRs, their cancel bound is 120 s
    "tests/dashboard/test_api.py",
    "tests/dashboard/test_bisect_browser.py",
    "tests/dashboard/test_bisect_cancel.py",
    "tests/dashboard/test_bisect_form.py",
    "tests/dashboard/test_browser.py",
    "tests/dashboard/test_browser_scale.py",
    "tests/dashboard/test_capacity.py",
    "tests/dashboard/test_compare_source_refs.py",
    "tests/dashboard/test_fairness.py",
    "tests/dashboard/test_flamegraph_browser.py",
    "tests/dashboard/test_history.py",
    "tests/dashboard/test_history_commits.py",
    "tests/dashboard/test_history_overview.py",
    "tests/dashboard/test_launch_fields.py",
    "tests/dashboard/test_launch_link.py",
    "tests/dashboard/test_launch_mixed.py",
    "tests/dashboard/test_launch_mixed_browser.py",
    "tests/dashboard/test_launch_tls.py",
    "tests/dashboard/test_mixed_tables.py",
    "tests/dashboard/test_profiles.py",
    "tests/dashboard/test_redaction.py",
    "tests/dashboard/test_saturation.py",
    "tests/dashboard/test_tcp_counters.py",
    "tests/dashboard/test_worker.py",
    # whole campaigns: what is stored and printed, not how fast
    "tests/integration/test_campaign.py",
    "tests/integration/test_compose_servers.py",
    "tests/integration/test_compose_stack.py",
    "tests/integration/test_default_driver_campaign.py",
    "tests/integration/test_ftps_campaign.py",
    "tests/integration/test_pasv_reuse.py",  # 500 RETRs within one TIME_WAIT (60 s): about 5 s
    "tests/integration/test_pg_restart.py",
    # backends and builds
    "tests/runner/backends/test_backends_cache.py",
    "tests/runner/backends/test_backends_local.py",
    "tests/runner/backends/test_c_source_build.py",
    "tests/runner/backends/test_compose_targets.py",
    "tests/runner/backends/test_docker_backend.py",
    "tests/runner/backends/test_docker_images.py",
    "tests/runner/backends/test_docker_spec.py",
    "tests/runner/backends/test_http_catalogue.py",
    "tests/runner/backends/test_http_probe.py",
    "tests/runner/backends/test_http_servers_docker.py",
    "tests/runner/backends/test_http_servers_local.py",
    "tests/runner/backends/test_source_build.py",
    # bisect and check (the slow commit: 50 ms per RETR), orders and reports
    "tests/runner/campaign/test_bisect_check.py",
    "tests/runner/campaign/test_bisect_order.py",
    "tests/runner/campaign/test_bisect_steps.py",
    "tests/runner/campaign/test_check_report.py",
    "tests/runner/campaign/test_mixed_campaign.py",
    "tests/runner/campaign/test_repeats.py",
    "tests/runner/catalogue/test_mixed_params.py",
    "tests/runner/catalogue/test_pairing.py",
    "tests/runner/catalogue/test_servers.py",
    "tests/runner/cell/test_outcome.py",
    "tests/runner/cell/test_samples_http.py",
    "tests/runner/cell/test_server_cpu.py",
    "tests/runner/cell/test_server_reuse.py",
    "tests/runner/cell/test_span_watch.py",
    "tests/runner/cell/test_upload_check.py",
    "tests/runner/cli/test_cli.py",
    "tests/runner/cli/test_cli_fairness.py",
    "tests/runner/cli/test_cli_tcp.py",
    # history: the slow commits run over a shaped 100 Mbit/s link, hundreds of MiB/s below loopback
    "tests/runner/history/test_by_commit.py",
    "tests/runner/history/test_points.py",
    "tests/runner/history/test_stepdetect.py",
    # the load generators' bookkeeping (bytes, operations, CPU within the call's own CPU)
    "tests/runner/load/ftp/test_driver.py",
    "tests/runner/load/ftp/test_fixtures.py",
    "tests/runner/load/ftp/test_session.py",
    "tests/runner/load/ftp/test_workloads.py",
    "tests/runner/load/tools/test_client_options.py",
    "tests/runner/load/tools/test_client_privileges.py",
    "tests/runner/load/tools/test_ftp_clients.py",
    "tests/runner/load/tools/test_ftp_clients_cell.py",
    "tests/runner/load/tools/test_ftp_clients_tpd.py",
    "tests/runner/load/tools/test_http_tool_parsers.py",
    "tests/runner/load/tools/test_http_tools.py",
    "tests/runner/load/tools/test_option_types.py",
    "tests/runner/load/tools/test_process_samples.py",
    "tests/runner/load/tools/test_spawn.py",
    "tests/runner/metrics/test_capacity.py",
    "tests/runner/metrics/test_fairness.py",
    "tests/runner/metrics/test_metrics_cgroup.py",
    "tests/runner/metrics/test_metrics_environment.py",
    "tests/runner/metrics/test_profile_fold.py",
    "tests/runner/metrics/test_tcpstats.py",
    "tests/runner/multihost/test_combine.py",
    "tests/runner/multihost/test_processes.py",  # hosts' start skew under 3 s
    "tests/runner/net/test_conditions.py",
    "tests/runner/net/test_netns.py",
    # reports and exports (from stored data; the HTML report in Chromium)
    "tests/runner/report/test_clients_table.py",
    "tests/runner/report/test_context.py",
    "tests/runner/report/test_export_golden.py",
    "tests/runner/report/test_fairness_column.py",
    "tests/runner/report/test_html_report.py",
    "tests/runner/report/test_html_report_browser.py",
    "tests/runner/report/test_report_exports.py",
    "tests/runner/report/test_report_injection.py",
    "tests/runner/report/test_report_stats.py",
    "tests/runner/report/test_report_tables.py",
    "tests/runner/report/test_saturation.py",
    "tests/runner/report/test_uploads_table.py",
    "tests/runner/spec/test_argv_property.py",
    "tests/runner/spec/test_inventory_policy.py",
    "tests/runner/spec/test_link_axis.py",
    "tests/runner/spec/test_model.py",
    "tests/runner/spec/test_profile_spec.py",
    "tests/runner/spec/test_redaction.py",
    "tests/runner/spec/test_source_spec.py",
    "tests/runner/spec/test_sweep.py",
    "tests/runner/store/test_link_queue_migration.py",
    "tests/runner/store/test_retry.py",
    "tests/runner/store/test_store.py",
    "tests/runner/test_config.py",
    "tests/runner/tls/test_certs_spec.py",
    "tests/runner/tls/test_ftps_docker.py",
    "tests/runner/tls/test_mixed_ftps.py",
    # the code checks (ruff, mypy, import-linter) and the skip policy
    "tests/test_code_rules.py",
    "tests/test_parts.py",
    "tests/test_skip_policy.py",
    # tpd's protocol, its fuzzers (a fixed time per target) and the soak (counts, RSS, descriptors)
    "tests/tpd/test_clients.py",
    "tests/tpd/test_ftp.py",
    "tests/tpd/test_fuzz.py",
    "tests/tpd/test_http.py",
    "tests/tpd/test_http_uploads.py",
    "tests/tpd/test_soak.py",
})
