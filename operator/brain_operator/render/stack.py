"""The whole stack of one Brain, in apply order (secrets and config before the pods that use them)."""

from __future__ import annotations

from brain_operator.render.backup import render_backup
from brain_operator.render.common import Manifest, RenderInput
from brain_operator.render.database import render_database
from brain_operator.render.embedder import render_embedder
from brain_operator.render.gateway import render_gateway
from brain_operator.render.jobs import render_ingest, render_scheduled_jobs
from brain_operator.render.monitoring import render_dashboard, render_service_monitor
from brain_operator.render.policy import render_network_policies, render_pdbs
from brain_operator.render.secrets import render_secrets


def render_brain(inp: RenderInput) -> list[Manifest]:
    """Every child the Brain should have right now (immediate ingest Jobs excepted: see jobs.py)."""
    out: list[Manifest] = []
    out += render_secrets(inp)
    # The fence before anything that listens: the reconciler applies in this order and stops at the
    # first failure, so a child the API server refuses must not leave the database unfenced.
    out += render_network_policies(inp)
    out += render_database(inp)
    out += render_embedder(inp)
    out += render_gateway(inp)
    out += render_scheduled_jobs(inp)
    out += render_backup(inp)
    for source in sorted(inp.memory_sources, key=lambda s: s.metadata.name):
        out += render_ingest(inp, source)
    out += render_pdbs(inp)
    out += render_service_monitor(inp)
    out += render_dashboard(inp)
    return out
