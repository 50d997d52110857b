"""The HTML pages: one module per page family, all included by
:data:`dashboard.pages.main.pages_router`."""
