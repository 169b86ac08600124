"""The models stage: loading from the hub, a local folder or a GGUF file, the model variants
(untrained, trained embeddings, ...), and the built-in model pretrained on the twins.

May import: ``common``, ``data``, ``config``.
"""
