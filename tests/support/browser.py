"""Debian's headless Chromium driven by Playwright (never ``playwright install``), for the
dashboard's and the HTML report's browser tests."""
from __future__ import annotations

from collections.abc import Iterator

from tests.support import REPO_ROOT

#: Debian's Chromium (apt package ``chromium``).
CHROMIUM = "/usr/bin/chromium"
#: Its arguments: no sandbox (root in a container), no GPU, no traffic of its own.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
#: Where the browser tests put their screenshots (gitignored).
SHOTS = REPO_ROOT / "artifacts" / "screenshots"


def chromium() -> Iterator:
    """Yield a launched headless :data:`CHROMIUM` (a Playwright ``Browser``), closed at the
    end; the body of the tests' ``browser`` fixtures. Makes :data:`SHOTS`."""
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def fill_form(page, fields: dict[str, str]) -> None:  # noqa: ANN001 (a Playwright Page)
    """Fill a page's form fields in order: ``{selector: value}``, a ``select...`` selector by
    choosing the option, any other by typing the value."""
    for selector, value in fields.items():
        if selector.startswith("select"):
            page.select_option(selector, value)
        else:
            page.fill(selector, value)
