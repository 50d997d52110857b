"""The JSON API under ``/api/``: one router module per resource in ``routes/``, all
included by :data:`dashboard.api.main.api_router`."""
