package devserver

// Ready is the line (JSON) the devtemporal command prints once the server
// it runs in its own process serves: what a client dials.
type Ready struct {
	HostPort  string `json:"host_port"`
	Namespace string `json:"namespace"`
}
