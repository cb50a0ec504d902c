// The pod sandbox's pause process, built here so no registry is needed for
// registry.k8s.io/pause (hack/node-build.sh).
module brain-operator/hack/node/pause

go 1.26.0
