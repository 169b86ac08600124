"""The activations stage: the recording hooks (``capture``), finetuning the K/V projections
(``training``), one extraction job (``extract``), the activation cache's format (``cache``), and
what peer tools record beside it (``peers``).

May import: ``common``, ``data``, ``config``, ``models``.
"""
