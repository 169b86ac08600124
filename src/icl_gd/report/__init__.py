"""The report stage: the papers' published numbers (``published``), tables, figures, the report's
first page (``summary``) and which output is which (``outputs``).

May import: ``common``, ``config``, ``metrics``, and of ``activations`` the cache's format alone.
"""
