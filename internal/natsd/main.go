// Command natsd runs a NATS server with JetStream for the tests and
// benchmarks of the NATS backend, as its own process, so that a test can
// kill it: on loopback, syncing every write (sync_interval: always), as a
// single server or as one node of a cluster, with the options of
// inbox-nats server (package natsserve) but without its secret: the tests'
// clients connect with no credentials. It is not installed; a real
// deployment runs nats-server with the settings docs/JETSTREAM.md gives.
//
//	natsd -port 4222 -dir /tmp/n1 [-name n1 -cluster-port 6222 -routes nats://127.0.0.1:6223,…]
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/inbox-dev/inbox/internal/natsserve"
)

func main() {
	port := flag.Int("port", -1, "client port (-1: any free one)")
	dir := flag.String("dir", "", "JetStream storage directory (required)")
	name := flag.String("name", "", "server name (required in a cluster)")
	clusterPort := flag.Int("cluster-port", 0, "cluster port (0: no cluster)")
	routes := flag.String("routes", "", "comma-separated nats:// URLs of the other nodes' cluster ports")
	ready := flag.String("ready", "", "write the client URL to this file once the server accepts connections")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "natsd: -dir is required")
		os.Exit(2)
	}
	if *port < 0 {
		*port = 0
	}
	opts, err := natsserve.Options(natsserve.Config{Listen: fmt.Sprintf("127.0.0.1:%d", *port), StoreDir: *dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(2)
	}
	opts.ServerName = *name
	if *clusterPort != 0 {
		opts.Cluster = server.ClusterOpts{Name: "inbox", Host: "127.0.0.1", Port: *clusterPort}
		for _, r := range strings.Split(*routes, ",") {
			if r == "" {
				continue
			}
			u, err := url.Parse(r)
			if err != nil {
				fmt.Fprintln(os.Stderr, "natsd:", err)
				os.Exit(2)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
	s.ConfigureLogger()
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		fmt.Fprintln(os.Stderr, "natsd: not ready within 30 s")
		os.Exit(1)
	}
	if *ready != "" {
		if err := os.WriteFile(*ready+".tmp", []byte(s.ClientURL()), 0o600); err == nil {
			os.Rename(*ready+".tmp", *ready)
		}
	}
	fmt.Println(s.ClientURL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s.Shutdown()
	s.WaitForShutdown()
}
