// CoreDNS for the real node (hack/node-up.sh) with only the plugins its Corefile uses
// (hack/node/cluster-addons.yaml: errors, health, ready, kubernetes, cache). Upstream's main
// imports core/plugin, which links every plugin and its cloud SDKs (AWS, Azure, Google, etcd...):
// that build took 13 of node-build's 25 cold minutes here. This is CoreDNS's documented way to
// trim the plugin set without editing plugin.cfg: a main of one's own that imports the plugins it
// wants and calls coremain.Run. A plugin added to the Corefile must be added here too, or
// CoreDNS refuses the Corefile ("Unknown directive"). go.mod raises the modules CoreDNS shares
// with the control plane (client-go and its graph) to hack/kube's versions, so a fresh machine
// compiles them once: hack/node/coredns-align.py keeps it so.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
