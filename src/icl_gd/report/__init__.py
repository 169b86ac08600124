"""The report stage: the papers' published numbers (``published``), tables, figures, the report's
first page (``summary``), the claims' wording (``claim_wording``), what the run cost, measured
(``costs``), and which output is which (``outputs``).

May import: ``common``, ``config``, ``metrics``, and of ``activations`` the cache's format alone.
"""
