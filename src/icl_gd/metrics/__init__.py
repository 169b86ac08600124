"""The metrics stage: the papers' metrics as pure numpy functions (``formulas``), the crossed
seeds x examples design (``inference``), a run's scores and their aggregation (``scoring``),
order sensitivity (``orders``), the claims' definitions (``claim_definitions``), their paired
tests on a run (``claim_testing``) and their premise (``premise``).

May import: ``common``, and of ``activations`` the cache's format alone (``activations.cache``):
a metric job loads no model code.
"""
