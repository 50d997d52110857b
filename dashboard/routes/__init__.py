"""Dashboard routes, one module per resource."""
