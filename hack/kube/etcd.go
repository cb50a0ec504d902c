package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd starts a single-member etcd from go.etcd.io/etcd/server/v3/embed. Only the flags
// the local control plane needs are offered; it serves plain HTTP on loopback.
func runEtcd() int {
	fs := flag.NewFlagSet("etcd", flag.ExitOnError)
	name := fs.String("name", "brain", "member name")
	dataDir := fs.String("data-dir", "etcd-data", "data directory")
	client := fs.String("listen-client-urls", "http://127.0.0.1:2379", "client URL (one)")
	peer := fs.String("listen-peer-urls", "http://127.0.0.1:2380", "peer URL (one)")
	metrics := fs.String("listen-metrics-urls", "", "metrics URL (optional)")
	logLevel := fs.String("log-level", "warn", "debug|info|warn|error")
	noFsync := fs.Bool("unsafe-no-fsync", false, "skip fsync (faster, unsafe on power loss; fine for tests)")
	quota := fs.Int64("quota-backend-bytes", 2<<30, "backend size quota")
	_ = fs.Parse(os.Args[1:])

	cu, err := url.Parse(*client)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd: bad --listen-client-urls:", err)
		return 2
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd: bad --listen-peer-urls:", err)
		return 2
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", *name, pu.String())
	cfg.LogLevel = *logLevel
	cfg.LogOutputs = []string{"stderr"}
	cfg.UnsafeNoFsync = *noFsync
	cfg.QuotaBackendBytes = *quota
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "5m"
	if *metrics != "" {
		mu, err := url.Parse(*metrics)
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcd: bad --listen-metrics-urls:", err)
			return 2
		}
		cfg.ListenMetricsUrls = []url.URL{*mu}
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd: start:", err)
		return 1
	}
	defer e.Close()

	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving %s\n", cu.String())
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60s")
		return 1
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %v, stopping\n", s)
		return 0
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 1
	}
}
