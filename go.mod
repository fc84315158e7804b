module lbdns

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/cloudflare/ipvs v0.12.0
	github.com/jsimonetti/rtnetlink/v2 v2.3.0
	github.com/mdlayher/netlink v1.11.2
	github.com/miekg/dns v1.1.73
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mdlayher/genetlink v1.3.2 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
