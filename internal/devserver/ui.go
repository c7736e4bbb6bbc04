package devserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// webUI is the Temporal Web UI served from the assets embedded in
// ui-server, talking gRPC to the frontend.
type webUI struct {
	srv  *uiserver.Server
	url  string
	done chan error // receives Start's result once the HTTP server exits
}

// startUI starts the Web UI on bindIP:port and waits until it answers its
// health route. A fixed port is checked first: ui-server exits the whole
// process when it cannot bind, so that case must be caught here.
func startUI(ctx context.Context, r resolved, frontendAddr string) (*webUI, error) {
	port := r.uiPort
	if port == 0 {
		p, err := freePort(r.bindIP)
		if err != nil {
			return nil, fmt.Errorf("web UI: %w", err)
		}
		port = p
	} else if err := checkPortFree("web UI", r.bindIP, port); err != nil {
		return nil, err
	}

	srv := uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		Host:                r.bindIP,
		Port:                port,
		TemporalGRPCAddress: frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    r.namespace,
		HideLogs:            true,
		DisableNewsFetch:    true,
		// Plain HTTP on a dev machine: the CSRF cookie must not be Secure.
		CORS: uiconfig.CORS{CookieInsecure: true},
	}))
	ui := &webUI{
		srv:  srv,
		url:  "http://" + net.JoinHostPort(r.dialIP, strconv.Itoa(port)),
		done: make(chan error, 1),
	}
	go func() { ui.done <- srv.Start() }()

	if err := ui.waitHealthy(ctx); err != nil {
		_ = ui.stop()
		return nil, err
	}
	return ui, nil
}

// waitHealthy polls the UI's /healthz until it answers 200.
func (u *webUI) waitHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url+"/healthz", nil)
		if err != nil {
			return fmt.Errorf("web UI health request: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("web UI at %s not healthy: %w (last error: %v)", u.url, ctx.Err(), lastErr)
		case err := <-u.done:
			u.done <- err // keep it for stop
			return fmt.Errorf("web UI at %s exited while starting: %v", u.url, err)
		case <-tick.C:
		}
	}
}

// stop closes the HTTP server and waits for its goroutine to end.
func (u *webUI) stop() error {
	u.srv.Stop()
	select {
	case err := <-u.done:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("web UI: %w", err)
		}
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("web UI at %s did not stop within 10s", u.url)
	}
}
