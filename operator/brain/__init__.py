"""brain: the data plane of brain-operator — store, embedder, retrieval, gateway hooks and jobs."""

# The one version source: the package (pyproject's dynamic version), the operator, the image tags it
# renders and the chart (hack/release.sh writes Chart.yaml from it; tests/delivery/test_release.py
# fails when they differ). main carries the next release's number; released commits: hack/releases.txt.
__version__ = "0.3.0"
