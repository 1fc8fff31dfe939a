package main

import (
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	listenerName = "xdsbed"
	routeName    = "xdsbed-route"
	clusterName  = "xdsbed-cluster"
)

func adsSource() *core.ConfigSource {
	return &core.ConfigSource{
		ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
		ResourceApiVersion:    core.ApiVersion_V3,
	}
}

// apiListener is what a gRPC client asks for: an API listener whose HTTP connection manager
// takes its routes from RDS and ends with the router filter.
func apiListener() (*listener.Listener, error) {
	routerCfg, err := anypb.New(&router.Router{})
	if err != nil {
		return nil, err
	}
	manager, err := anypb.New(&hcm.HttpConnectionManager{
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			ConfigSource: adsSource(), RouteConfigName: routeName,
		}},
		HttpFilters: []*hcm.HttpFilter{{
			Name: "router", ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: routerCfg},
		}},
	})
	if err != nil {
		return nil, err
	}
	return &listener.Listener{Name: listenerName, ApiListener: &listener.ApiListener{ApiListener: manager}}, nil
}

func routes(version string) *route.RouteConfiguration {
	return &route.RouteConfiguration{
		Name: routeName,
		VirtualHosts: []*route.VirtualHost{{
			Name:    "xdsbed-" + version, // differs per version, so each version is a real change
			Domains: []string{"*"},
			Routes: []*route.Route{{
				Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: ""}},
				Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: clusterName}}},
			}},
		}},
	}
}

// edsCluster is a round-robin EDS cluster; reject makes it one a gRPC client refuses
// (least-request with a choice count below 2), so that client NACKs the whole CDS update.
func edsCluster(reject bool) *cluster.Cluster {
	c := &cluster.Cluster{
		Name:                 clusterName,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: clusterName},
		LbPolicy:             cluster.Cluster_ROUND_ROBIN,
	}
	if reject {
		c.LbPolicy = cluster.Cluster_LEAST_REQUEST
		c.LbConfig = &cluster.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &cluster.Cluster_LeastRequestLbConfig{
			ChoiceCount: wrapperspb.UInt32(1),
		}}
	}
	return c
}

func endpoints(port uint32) *endpoint.ClusterLoadAssignment {
	addr := &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Address: "127.0.0.1", PortSpecifier: &core.SocketAddress_PortValue{PortValue: port},
	}}}
	return &endpoint.ClusterLoadAssignment{
		ClusterName: clusterName,
		Endpoints: []*endpoint.LocalityLbEndpoints{{
			Locality:            &core.Locality{Region: "xdsbed", Zone: "local"},
			LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints: []*endpoint.LbEndpoint{{
				HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: addr}},
			}},
		}},
	}
}

// buildSnapshot is one node's LDS/RDS/CDS/EDS at one version; the endpoint is the control
// plane's own gRPC port, a live address the client can connect to.
func buildSnapshot(version string, reject bool, endpointPort uint32) (*cache.Snapshot, error) {
	lis, err := apiListener()
	if err != nil {
		return nil, err
	}
	return cache.NewSnapshot(version, map[resource.Type][]types.Resource{
		resource.ListenerType: {lis},
		resource.RouteType:    {routes(version)},
		resource.ClusterType:  {edsCluster(reject)},
		resource.EndpointType: {endpoints(endpointPort)},
	})
}
