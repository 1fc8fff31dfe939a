// CoreDNS with only the plugins the real node's Corefile uses (realnode/dns.py: bind, errors,
// ready, kubernetes, cache). The stock command links every plugin in plugin.cfg, cloud SDKs
// included: 359 s to build on a fresh machine, 169 s for this one. The directive order stays CoreDNS's own
// (dnsserver.Directives); a Corefile naming any other plugin fails at start with its name.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
