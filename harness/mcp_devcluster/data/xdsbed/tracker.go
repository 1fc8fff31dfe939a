package main

import (
	"context"
	"sort"
	"sync"
	"time"

	admin "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// typeState is what the control plane knows of one node's one xDS type.
type typeState struct {
	sentVersion, sentNonce string
	ackedVersion           string
	nackVersion, nackError string
	updated, nackAt        time.Time
}

type nodeState struct {
	connected      bool
	disconnectedAt time.Time
	types          map[string]*typeState
}

// tracker follows every ADS stream (what was sent, ACKed and NACKed, and when) so the control
// plane can answer CSDS for its nodes; go-control-plane has no CSDS of its own.
type tracker struct {
	mu        sync.Mutex
	streams   map[int64]string
	nodes     map[string]*nodeState
	desired   map[string]string
	desiredAt map[string]time.Time
}

func newTracker() *tracker {
	return &tracker{streams: map[int64]string{}, nodes: map[string]*nodeState{},
		desired: map[string]string{}, desiredAt: map[string]time.Time{}}
}

func (t *tracker) typeOf(node, typeURL string) *typeState {
	n, ok := t.nodes[node]
	if !ok {
		n = &nodeState{types: map[string]*typeState{}}
		t.nodes[node] = n
	}
	ts, ok := n.types[typeURL]
	if !ok {
		ts = &typeState{}
		n.types[typeURL] = ts
	}
	return ts
}

func (t *tracker) setDesired(node, version string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.desired[node] = version
	t.desiredAt[node] = time.Now()
}

func (t *tracker) onRequest(stream int64, req *discovery.DiscoveryRequest) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	node := req.GetNode().GetId()
	if node != "" {
		t.streams[stream] = node
	} else {
		node = t.streams[stream]
	}
	if node == "" {
		return nil
	}
	ts := t.typeOf(node, req.GetTypeUrl())
	t.nodes[node].connected = true
	now := time.Now()
	switch {
	case req.GetErrorDetail() != nil:
		ts.nackVersion, ts.nackError, ts.nackAt = ts.sentVersion, req.GetErrorDetail().GetMessage(), now
		ts.ackedVersion, ts.updated = req.GetVersionInfo(), now
	case req.GetResponseNonce() != "" && req.GetResponseNonce() == ts.sentNonce:
		ts.ackedVersion, ts.nackError, ts.updated = req.GetVersionInfo(), "", now
	}
	return nil
}

func (t *tracker) onResponse(_ context.Context, stream int64, req *discovery.DiscoveryRequest, resp *discovery.DiscoveryResponse) {
	t.mu.Lock()
	defer t.mu.Unlock()
	node := t.streams[stream]
	if node == "" {
		return
	}
	ts := t.typeOf(node, resp.GetTypeUrl())
	ts.sentVersion, ts.sentNonce, ts.updated = resp.GetVersionInfo(), resp.GetNonce(), time.Now()
}

func (t *tracker) onClosed(stream int64, _ *core.Node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	node := t.streams[stream]
	delete(t.streams, stream)
	if n, ok := t.nodes[node]; ok {
		n.connected, n.disconnectedAt = false, time.Now()
	}
}

var reportedTypes = []string{resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType}

// genericConfig is one node's one type as the management server sees it: SYNCED when the
// node ACKed the version it should have, ERROR on a NACK, STALE when it is behind or gone,
// NOT_SENT when it never asked. last_updated is when that state began.
func (t *tracker) genericConfig(node string, n *nodeState, typeURL string) *statuspb.ClientConfig_GenericXdsConfig {
	cfg := &statuspb.ClientConfig_GenericXdsConfig{TypeUrl: typeURL}
	ts, ok := n.types[typeURL]
	if !ok {
		cfg.ConfigStatus = statuspb.ConfigStatus_NOT_SENT
		return cfg
	}
	cfg.VersionInfo = ts.ackedVersion
	desired, since := t.desired[node], t.desiredAt[node]
	switch {
	case ts.nackError != "":
		cfg.ConfigStatus, cfg.ClientStatus = statuspb.ConfigStatus_ERROR, admin.ClientResourceStatus_NACKED
		cfg.ErrorState = &admin.UpdateFailureState{
			Details: ts.nackError, VersionInfo: ts.nackVersion, LastUpdateAttempt: timestamppb.New(ts.nackAt),
		}
		cfg.LastUpdated = timestamppb.New(ts.nackAt)
	case !n.connected:
		if n.disconnectedAt.After(since) {
			since = n.disconnectedAt
		}
		cfg.ConfigStatus, cfg.LastUpdated = statuspb.ConfigStatus_STALE, timestamppb.New(since)
	case ts.ackedVersion == desired:
		cfg.ConfigStatus, cfg.ClientStatus = statuspb.ConfigStatus_SYNCED, admin.ClientResourceStatus_ACKED
		cfg.LastUpdated = timestamppb.New(ts.updated)
	default:
		cfg.ConfigStatus, cfg.LastUpdated = statuspb.ConfigStatus_STALE, timestamppb.New(since)
	}
	return cfg
}

func (t *tracker) clientStatus() *statuspb.ClientStatusResponse {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]string, 0, len(t.nodes))
	for id := range t.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	resp := &statuspb.ClientStatusResponse{}
	for _, id := range ids {
		cc := &statuspb.ClientConfig{Node: &core.Node{Id: id}}
		for _, typeURL := range reportedTypes {
			cc.GenericXdsConfigs = append(cc.GenericXdsConfigs, t.genericConfig(id, t.nodes[id], typeURL))
		}
		resp.Config = append(resp.Config, cc)
	}
	return resp
}

// csdsServer answers FetchClientStatus (and the stream form) from the tracker.
type csdsServer struct {
	statuspb.UnimplementedClientStatusDiscoveryServiceServer
	tracker *tracker
}

func (s *csdsServer) FetchClientStatus(context.Context, *statuspb.ClientStatusRequest) (*statuspb.ClientStatusResponse, error) {
	return s.tracker.clientStatus(), nil
}

func (s *csdsServer) StreamClientStatus(stream statuspb.ClientStatusDiscoveryService_StreamClientStatusServer) error {
	for {
		if _, err := stream.Recv(); err != nil {
			return nil
		}
		if err := stream.Send(s.tracker.clientStatus()); err != nil {
			return err
		}
	}
}
