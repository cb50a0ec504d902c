// otelcol-brain: a minimal OpenTelemetry Collector for brain-operator's tests (issue #31).
//
// The same components the upstream builder (go.opentelemetry.io/collector/cmd/builder) would
// wire from a manifest, written out by hand so the source, go.mod and go.sum are committed and
// the build is locked: the OTLP receiver (HTTP and gRPC), the batch processor, and the debug and
// file exporters. tests/otel_fixtures.py runs it on loopback; hack/otelcol-build.sh builds it.
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// Version is set by hack/otelcol-build.sh (-ldflags -X main.Version=...).
var Version = "dev"

func components() (otelcol.Factories, error) {
	var (
		f   otelcol.Factories
		err error
	)
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](batchprocessor.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](
		debugexporter.NewFactory(), fileexporter.NewFactory()); err != nil {
		return f, err
	}
	// The collector's own logs and metrics (service.telemetry in the config).
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol-brain",
			Description: "OpenTelemetry Collector for brain-operator's tests (otlp, batch, debug, file)",
			Version:     Version,
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					envprovider.NewFactory(),
					fileprovider.NewFactory(),
					yamlprovider.NewFactory(),
				},
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		log.Fatalf("otelcol-brain: %v", err)
	}
}
