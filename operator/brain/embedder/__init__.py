"""Embeddings: fastembed in-process or behind an OpenAI-compatible HTTP server, and a resilient client."""

from brain.embedder.client import EmbedderUnavailable, EmbeddingClient
from brain.embedder.model import DEFAULT_MODEL, Embedder, LocalEmbedder, QueryCache

__all__ = [
    "DEFAULT_MODEL",
    "Embedder",
    "EmbedderUnavailable",
    "EmbeddingClient",
    "LocalEmbedder",
    "QueryCache",
]
