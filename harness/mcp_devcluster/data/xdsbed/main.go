// Command xdsbed is a real xDS testbed for the xDS sync check.
//
//	xdsbed server --xds-port P --admin-port A --nodes n1,n2
//	    an xDS control plane (go-control-plane's snapshot cache, ADS, LDS/RDS/CDS/EDS) with its own
//	    CSDS service on the xDS port and an HTTP admin API to set snapshot versions
//	xdsbed client --node n1 --server 127.0.0.1:P --csds-port C
//	    a grpc-go xDS client (an xds:/// channel) that serves grpc-go's CSDS on port C
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: xdsbed server|client [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = runServer(os.Args[2:])
	case "client":
		err = runClient(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q (want server or client)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdsbed:", err)
		os.Exit(1)
	}
}
