"""The planning stage: what a config will run and what it will take, known before it starts: the
plan of a run (``plan``: its runs, settings, report tables and figures, pairings, read by the
Snakefile and reaching the jobs as their parameters), what its caches take on disk (``disk``),
what its model jobs will take (``cost``: wall time and peak memory, from their counted work and
rates timed on the machine at hand by ``timing``, or a named GPU's figures in ``devices``; the
built-in model's build priced in ``build_cost``) and what each model job asks its scheduler for
(``resources``, from the cost estimate). It counts the work of the stages below it and imports no
metric or report code; no stage imports it.

May import: ``common``, ``data``, ``config``, ``models``, ``activations``.
"""
