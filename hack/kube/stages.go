package main

import (
	"fmt"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeatwithlease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

// runKwokStages prints kwok's default Stages (the set kwokctl configures for its binary
// runtime: node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete,
// pod-delete) as one multi-document YAML, for `kwok --config=<file>`. The kwok
// controller itself ships no default stages.
func runKwokStages() int {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeatwithlease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		if i > 0 {
			fmt.Println("---")
		}
		fmt.Println(strings.TrimSpace(d))
	}
	return 0
}
