"""Dashboard pages: one module per page, each with PATH, NAME, ORDER, layout(**query), register_callbacks(app)."""
