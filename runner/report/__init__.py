"""Reports: statistics, table models and exports of campaign results.

Input is plain data (:mod:`runner.report.data`), never the database.

* :mod:`runner.report.stats` -- ``summarize`` (median + distribution-free 95% CI),
  ``compare`` (pyperf ratio, Mann-Whitney U, seed speedup).
* :mod:`runner.report.tables` -- ``comparison_table``, ``memory_table``,
  ``campaign_table``, ``report_tables``: export-neutral :class:`Table` models.
* Exports, each ``render(table_or_data, *, options) -> str``: :mod:`.rst`,
  :mod:`.html`, :mod:`.md`, :mod:`.csv`, :mod:`.json` (plus ``load_json``),
  and :mod:`.text` (rich, ``render_rich``; pyperf one-liners); :mod:`.markup` is the
  skeleton the RST and Markdown tables share.
"""

#: The export formats (``--format`` of the CLI, in the order its ``--help`` shows them;
#: ``/api/.../export?format=`` of the dashboard), rendered by
#: :func:`runner.report.render.render_tables`.
FORMATS = ("rst", "html", "md", "csv", "json", "text")
