"""The operator process's environment, read once: the Deployment's way to set every flag.

`python -m brain_operator` takes each flag's default from here (brain_operator.main), and the images
it renders; nothing below the command line reads the environment (`make lint`, ruff TID251). The
renderer (render/) gets its values passed in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from brain_operator.render.common import DEFAULT_IMAGES, Images


def _env(environ: Mapping[str, str], name: str, default: str) -> str:
    return environ.get(name, default) or default


def images_from_env(environ: Mapping[str, str] = os.environ) -> Images:
    """``BRAIN_OPERATOR_<COMPONENT>_IMAGE`` overrides each image (air-gapped registries, pinning)."""
    return Images(
        **{
            key: _env(environ, f"BRAIN_OPERATOR_{key.upper()}_IMAGE", DEFAULT_IMAGES[key])
            for key in Images.__dataclass_fields__
        }
    )


@dataclass(frozen=True)
class OperatorEnv:
    """The BRAIN_OPERATOR_* variables as written; brain_operator.main parses them, so a bad value
    fails as it always did, at the command line."""

    values: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str, default: str = "") -> str:
        """The variable as written; `default` when unset (an empty value stays empty)."""
        return self.values.get(name, default)

    def list(self, name: str) -> list[str]:
        """A comma list (BRAIN_OPERATOR_NAMESPACES)."""
        return [x.strip() for x in self.values.get(name, "").split(",") if x.strip()]


def load_operator_env(environ: Mapping[str, str] = os.environ) -> OperatorEnv:
    return OperatorEnv({k: v for k, v in environ.items() if k.startswith("BRAIN_OPERATOR_")})
