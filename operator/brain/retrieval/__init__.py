"""Hybrid retrieval: vector + full-text (+ trigram) legs, fused, filtered, ranked and rendered as data."""

from brain.retrieval.pipeline import RetrievalConfig, RetrievalResult, Retriever
from brain.retrieval.render import render_block

__all__ = ["RetrievalConfig", "RetrievalResult", "Retriever", "render_block"]
