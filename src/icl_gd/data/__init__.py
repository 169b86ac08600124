"""The data stage: the six tasks' presets, their synthetic twins, real text that Python packages
ship (``corpora``), loading and selecting splits (``splits``), and the token sequences of a
prompt (``prompts``).

May import: ``common``.
"""
