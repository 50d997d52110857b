"""Flame graph pages: one profiled cell's page (its on-CPU flame graph embedded, the
on/off-CPU split and the syscall table beside it), the flame graph SVGs themselves, and the
differential flame graph of two compare operands.

An inferno SVG carries its own inline script (zoom, search, hover). It is served as a
document of its own, under a Content-Security-Policy that allows only that script and
inline styles and nothing to fetch, with ``nosniff``; the HTML page embeds it with an
``<iframe>`` of the same origin.
"""
from __future__ import annotations

import base64
import hashlib
import re
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import Response

from dashboard.deps import INT4_MAX, OptionalCampaign, SessionDep
from dashboard.services import profiles as svc
from dashboard.templating import render

router = APIRouter()

CellId = Annotated[int, PathParam(ge=1, le=INT4_MAX, description="cell id")]
#: Width of a flame graph in pixels (inferno's ``--width``); the cell page embeds it at 900.
SvgWidth = Annotated[int, Query(ge=400, le=4000, description="image width, pixels")]
_SCRIPT_RE = re.compile(r"<script[^>]*>(.*?)</script>", re.S)
_CDATA_RE = re.compile(r"<!\[CDATA\[(.*?)\]\]>", re.S)
_HANDLER_RE = re.compile(r'\son[a-z]+="([^"]*)"')
_ROOT_RE = re.compile(r"<svg\s[^>]*>")


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def svg_policy(svg: str) -> str:
    """The Content-Security-Policy of a served flame graph: no fetch of any kind, the
    SVG's own ``<script>`` elements by the sha256 of their text (their CDATA sections
    joined, as the browser hashes them; CSP level 2), its inline event attributes
    on the root element (``onload="init(evt)"``) by ``'unsafe-hashes'`` of the same kind,
    inline styles. Frame names are text and attributes inferno escaped: never a source."""
    hashes = {_sha256(_CDATA_RE.sub(r"\1", inner)) for inner in _SCRIPT_RE.findall(svg)}
    root = _ROOT_RE.search(svg)  # inferno's one handler sits on the root element
    hashes |= {_sha256(handler) for handler in _HANDLER_RE.findall(root.group(0) if root else "")}
    sources = " ".join(f"'sha256-{h}'" for h in sorted(hashes))
    return (f"default-src 'none'; script-src 'unsafe-hashes' {sources}; style-src 'unsafe-inline'; "
            "img-src data:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'")


def svg_response(svg: str) -> Response:
    """``svg`` as ``image/svg+xml`` with :func:`svg_policy`, ``nosniff`` and no caching."""
    return Response(svg, media_type="image/svg+xml",
                    headers={"Content-Security-Policy": svg_policy(svg), "X-Content-Type-Options": "nosniff",
                             "Cache-Control": "no-store"})



@router.get("/cells/{cell_id}/profile")
def page_cell_profile(request: Request, session: SessionDep, cell_id: CellId):
    p = svc.cell_profile(session, cell_id=cell_id)
    return render(request, "profile.html", p=p, s=svc.profile_summary(p))


@router.get("/cells/{cell_id}/flamegraph.svg")
def svg_cell(session: SessionDep, cell_id: CellId, kind: Literal["on", "off"] = "on", width: SvgWidth = 1200):
    return svg_response(svc.cell_svg(session, cell_id=cell_id, kind=kind, width=width))


@router.get("/compare/flamegraph.svg")
def svg_compare(session: SessionDep, a: str = Query(..., max_length=300), b: str = Query(..., max_length=300),
                workload: str = Query(..., max_length=40), params_key: str = Query(..., max_length=400),
                campaign: OptionalCampaign = None, width: SvgWidth = 1200):
    return svg_response(svc.compare_svg(session, a=a, b=b, campaign=campaign, workload=workload,
                                        params_key=params_key, width=width))
