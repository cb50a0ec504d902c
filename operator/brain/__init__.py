"""brain: the data plane of brain-operator — store, embedder, retrieval, gateway hooks and jobs."""

__version__ = "0.1.0"
