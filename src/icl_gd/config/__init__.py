"""A config resolved into what the stages run (``resolve``: task specs, seeds, learning rates,
demonstrations) and validated against the schema (``validation``). It sits above ``data`` because
a task is checked against the data stage's presets and corpora.

May import: ``common``, ``data``.
"""
