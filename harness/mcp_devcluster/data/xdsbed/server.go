package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	xdsserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

type controlPlane struct {
	mu       sync.Mutex
	cache    cache.SnapshotCache
	tracker  *tracker
	nodes    []string
	xdsPort  uint32
	versions map[string]string
}

// setSnapshot gives every node (or the named ones) version; nodes in reject get a Cluster
// that a gRPC client refuses.
func (cp *controlPlane) setSnapshot(version string, nodes []string, reject map[string]bool) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, node := range nodes {
		snap, err := buildSnapshot(version, reject[node] || reject["*"], cp.xdsPort)
		if err != nil {
			return err
		}
		cp.tracker.setDesired(node, version)
		if err := cp.cache.SetSnapshot(context.Background(), node, snap); err != nil {
			return err
		}
		cp.versions[node] = version
	}
	return nil
}

func splitList(value string) []string {
	var out []string
	for _, item := range strings.Split(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func (cp *controlPlane) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST /snapshot?version=V[&nodes=a,b][&reject=a|*]", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	version := q.Get("version")
	if version == "" {
		http.Error(w, "version is required", http.StatusBadRequest)
		return
	}
	nodes := splitList(q.Get("nodes"))
	if len(nodes) == 0 {
		nodes = cp.nodes
	}
	reject := map[string]bool{}
	for _, n := range splitList(q.Get("reject")) {
		reject[n] = true
	}
	if err := cp.setSnapshot(version, nodes, reject); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	cp.writeVersions(w)
}

func (cp *controlPlane) writeVersions(w http.ResponseWriter) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"versions": cp.versions})
}

func runServer(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	xdsPort := fs.Int("xds-port", 0, "ADS and CSDS gRPC port")
	adminPort := fs.Int("admin-port", 0, "HTTP admin port")
	nodeList := fs.String("nodes", "", "comma-separated node ids")
	version := fs.String("version", "v1", "initial snapshot version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *xdsPort == 0 || *adminPort == 0 {
		return fmt.Errorf("server needs --xds-port and --admin-port")
	}
	track := newTracker()
	cp := &controlPlane{
		cache:    cache.NewSnapshotCache(true, cache.IDHash{}, nil),
		tracker:  track,
		nodes:    splitList(*nodeList),
		xdsPort:  uint32(*xdsPort),
		versions: map[string]string{},
	}
	if err := cp.setSnapshot(*version, cp.nodes, nil); err != nil {
		return err
	}
	callbacks := xdsserver.CallbackFuncs{
		StreamRequestFunc:  track.onRequest,
		StreamResponseFunc: track.onResponse,
		StreamClosedFunc:   track.onClosed,
	}
	xds := xdsserver.NewServer(context.Background(), cp.cache, callbacks)
	grpcServer := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(grpcServer, xds)
	statuspb.RegisterClientStatusDiscoveryServiceServer(grpcServer, &csdsServer{tracker: track})
	lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *xdsPort))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/snapshot", cp.handleSnapshot)
	mux.HandleFunc("/versions", func(w http.ResponseWriter, _ *http.Request) { cp.writeVersions(w) })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	go func() {
		log.Fatal(http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", *adminPort), mux))
	}()
	log.Printf("control plane: xDS+CSDS on %s, admin on :%d, nodes %v", lis.Addr(), *adminPort, cp.nodes)
	return grpcServer.Serve(lis)
}
