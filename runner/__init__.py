"""xferlab's runner: campaign specs in, stored samples and reports out (docs/architecture.md).

What a library user imports (loaded on first use, so ``import runner`` stays cheap)::

    from runner import parse_spec, run_campaign, load_campaign, render_tables
    spec = parse_spec(open("campaign.yaml").read())       # CampaignSpec; SpecError names bad fields

The folders below are the layers of the data flow: spec -> campaign -> cell -> load,
backends, metrics -> store -> report.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

#: Public name -> the module defining it.
PUBLIC: dict[str, str] = {
    "CampaignSpec": "runner.spec.model",
    "SpecError": "runner.spec.model",
    "parse_spec": "runner.spec.model",
    "run_campaign": "runner.campaign.loop",
    "load_campaign": "runner.report.reader",
    "render_tables": "runner.report.render",
    "get_driver": "runner.load.registry",
    "get_settings": "runner.config",
}
__all__ = sorted(PUBLIC)


def __getattr__(name: str) -> Any:
    """The public names of :data:`PUBLIC`, imported on first access (PEP 562)."""
    if name in PUBLIC:
        return getattr(import_module(PUBLIC[name]), name)
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
