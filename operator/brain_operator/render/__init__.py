"""Pure renderers: a Brain (plus its RoutingPolicies and MemorySources) → Kubernetes manifests.

No I/O, no clock, no randomness: the handler passes in generated secrets and cluster capabilities,
adds ownerReferences and applies the result.
"""

from brain_operator.render.common import Capabilities, GeneratedSecrets, Images, Manifest, RenderInput
from brain_operator.render.litellm_config import render_litellm_config
from brain_operator.render.stack import render_brain

__all__ = [
    "Capabilities",
    "GeneratedSecrets",
    "Images",
    "Manifest",
    "RenderInput",
    "render_brain",
    "render_litellm_config",
]
