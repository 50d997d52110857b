"""The xferlab web dashboard: launch campaigns, watch them run, compare, see regressions, export.

FastAPI app (:func:`dashboard.app.create_app`), Jinja2 templates, Chart.js served from
the Debian package libjs-chart.js. The dashboard never runs benchmarks: it queues
campaigns in PostgreSQL and ``xferlab worker`` claims them.
"""
