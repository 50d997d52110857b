"""Downloads of the exports: a report's text as an attachment with its media type and a
safe file name. The bytes are those of the CLI (``xferlab export ID --format F -o FILE``,
``xferlab compare A B --format F -o FILE``): both call runner.report.render."""
from __future__ import annotations

import re

from fastapi.responses import Response

from runner.report.render import FORMATS

MEDIA_TYPES = {"text": "text/plain", "rst": "text/x-rst", "html": "text/html", "md": "text/markdown",
               "csv": "text/csv", "json": "application/json"}
SUFFIX = {"text": "txt", "rst": "rst", "html": "html", "md": "md", "csv": "csv", "json": "json"}
FORMAT_PATTERN = "^(" + "|".join(FORMATS) + ")$"
"""The ``format`` query parameter's pattern: one of runner.report.render.FORMATS."""


def download(body: str, fmt: str, stem: str) -> Response:
    """``body`` (UTF-8) as an attachment of format ``fmt`` (a key of :data:`MEDIA_TYPES`)
    named ``STEM.SUFFIX``, ``stem`` reduced to ``[A-Za-z0-9._-]`` (``export`` if nothing is left)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("_") or "export"
    return Response(body.encode(), media_type=f"{MEDIA_TYPES[fmt]}; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{stem}.{SUFFIX[fmt]}"'})
