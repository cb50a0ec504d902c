// Command kube is a multi-call binary holding a whole local Kubernetes control plane:
// etcd (embedded), kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and
// kwok, plus kwok-stages (prints kwok's default Stages for its --config). It dispatches on the base name of argv[0] (symlinks kube-apiserver -> kube, ...)
// or, when called as "kube", on its first argument ("kube kubectl get pods").
//
// One binary means one link step and every shared package compiled once, which keeps the
// first build on a 2-core machine inside the CI budget. See docs/control-plane.md.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	_ "time/tzdata" // CronJob time zone support (apiserver validation, controller-manager)

	"github.com/spf13/pflag"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric registration

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl client auth plugins
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"

	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwoksignals "sigs.k8s.io/kwok/pkg/utils/signals"
)

var commands = map[string]func() int{
	"etcd": runEtcd,
	"kube-apiserver": func() int {
		return cli.Run(apiserver.NewAPIServerCommand())
	},
	"kube-controller-manager": func() int {
		return cli.Run(controllermanager.NewControllerManagerCommand())
	},
	"kube-scheduler": func() int {
		return cli.Run(scheduler.NewSchedulerCommand())
	},
	"kubectl":     runKubectl,
	"kwok":        runKwok,
	"kwok-stages": runKwokStages,
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	run, ok := commands[name]
	if !ok {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kube {%s} [args...] (or call through a symlink of that name)\n",
			strings.Join(names, "|"))
		os.Exit(2)
	}
	os.Exit(run())
}

// runKubectl mirrors k8s.io/kubernetes/cmd/kubectl/kubectl.go.
func runKubectl() int {
	logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err) // prints and exits non-zero
	}
	return 0
}

// runKwok mirrors sigs.k8s.io/kwok/cmd/kwok/main.go.
func runKwok() int {
	// kube-apiserver & co. register a global "--version" pflag of their own type
	// (component-base/version/verflag); cobra merges pflag.CommandLine into every root
	// command, which clashes with kwok's boolean --version. kwok needs none of them.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)

	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := kwoksignals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, flagset)
	ctx, err := kwokconfig.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}
