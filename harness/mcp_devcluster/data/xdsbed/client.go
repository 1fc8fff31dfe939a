package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"syscall"

	statusgrpc "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/xds" // the xds:/// resolver and its balancers
	"google.golang.org/grpc/xds/csds"
)

const bootstrapEnv = "GRPC_XDS_BOOTSTRAP_CONFIG"

// bootstrap is the grpc-go bootstrap for one node; grpc-go reads it from the environment at
// start-up, so the client re-executes itself with it set.
func bootstrap(node, server string) (string, error) {
	doc := map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":      server,
			"channel_creds":   []any{map[string]any{"type": "insecure"}},
			"server_features": []string{"xds_v3"},
		}},
		"node": map[string]any{"id": node, "cluster": "xdsbed"},
	}
	raw, err := json.Marshal(doc)
	return string(raw), err
}

func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	node := fs.String("node", "", "xDS node id")
	server := fs.String("server", "", "control plane host:port")
	csdsPort := fs.Int("csds-port", 0, "port of this client's CSDS service")
	target := fs.String("target", listenerName, "xds:/// target (the Listener name)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *node == "" || *server == "" || *csdsPort == 0 {
		return fmt.Errorf("client needs --node, --server and --csds-port")
	}
	if os.Getenv(bootstrapEnv) == "" {
		config, err := bootstrap(*node, *server)
		if err != nil {
			return err
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		return syscall.Exec(exe, os.Args, append(os.Environ(), bootstrapEnv+"="+config))
	}
	conn, err := grpc.NewClient("xds:///"+*target,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithIdleTimeout(0))
	if err != nil {
		return fmt.Errorf("xds channel: %w", err)
	}
	defer conn.Close()
	conn.Connect() // leave idle now, so the resolver starts its LDS/RDS/CDS/EDS watches

	lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *csdsPort))
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	status, err := csds.NewClientStatusDiscoveryServer()
	if err != nil {
		return err
	}
	statusgrpc.RegisterClientStatusDiscoveryServiceServer(srv, status)
	log.Printf("client %s: CSDS on %s, control plane %s", *node, lis.Addr(), *server)
	return srv.Serve(lis)
}
