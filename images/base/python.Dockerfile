# The Python base used where no registry is reachable (hack/base-images.sh builds it on the
# mmdebstrap Debian root): Debian's python3 (3.11 on bookworm) and python3-venv, nothing else.
# Elsewhere the images build FROM docker.io/library/python:3.11-slim-bookworm instead.
ARG DEBIAN_IMAGE=brain-base/debian:bookworm-v2
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
ENV LANG=C.UTF-8
CMD ["python3"]
