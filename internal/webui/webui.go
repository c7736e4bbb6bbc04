// Package webui owns the Temporal Web UI that archiveflow serves itself:
// the UI assets embedded in ui-server (github.com/temporalio/ui-server, at
// the version in go.mod) served over HTTP and talking gRPC to a Temporal
// frontend — the embedded dev stack's or any other — and reading what a
// page of it shows with headless Chromium, for the checks that it lists
// archiveflow's jobs.
package webui

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

	"github.com/archiveflow/archiveflow/internal/freeport"
)

// Options configures a Web UI.
type Options struct {
	// Host is the address the UI listens on, e.g. "127.0.0.1" or "0.0.0.0".
	Host string
	// DialHost is the address its URL uses; "" means Host (set it when
	// Host is an unspecified address such as 0.0.0.0).
	DialHost string
	// Port is the HTTP port; 0 picks a free one.
	Port int
	// TemporalAddr is the Temporal frontend's gRPC host:port.
	TemporalAddr string
	// Namespace is the namespace the UI opens by default.
	Namespace string
}

// Server is a running Web UI.
type Server struct {
	srv  *uiserver.Server
	url  string
	done chan error // receives Start's result once the HTTP server exits
}

// Start starts the Web UI and returns once it answers its health route. A
// fixed port is checked first: ui-server exits the whole process when it
// cannot bind, so that case must be caught here. ctx bounds the start-up.
func Start(ctx context.Context, o Options) (*Server, error) {
	port := o.Port
	if port == 0 {
		p, err := freeport.Port(o.Host)
		if err != nil {
			return nil, fmt.Errorf("web UI: %w", err)
		}
		port = p
	} else if err := freeport.CheckFree("web UI", o.Host, port); err != nil {
		return nil, err
	}
	dial := o.DialHost
	if dial == "" {
		dial = o.Host
	}

	srv := uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		Host:                o.Host,
		Port:                port,
		TemporalGRPCAddress: o.TemporalAddr,
		EnableUI:            true,
		DefaultNamespace:    o.Namespace,
		HideLogs:            true,
		DisableNewsFetch:    true,
		// Plain HTTP: the CSRF cookie must not be Secure.
		CORS: uiconfig.CORS{CookieInsecure: true},
	}))
	ui := &Server{
		srv:  srv,
		url:  "http://" + net.JoinHostPort(dial, strconv.Itoa(port)),
		done: make(chan error, 1),
	}
	go func() { ui.done <- srv.Start() }()

	if err := ui.waitHealthy(ctx); err != nil {
		_ = ui.Stop()
		return nil, err
	}
	return ui, nil
}

// URL is the UI's base URL, e.g. "http://127.0.0.1:8233".
func (u *Server) URL() string { return u.url }

// waitHealthy polls the UI's /healthz until it answers 200.
func (u *Server) waitHealthy(ctx context.Context) error {
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
			u.done <- err // keep it for Stop
			return fmt.Errorf("web UI at %s exited while starting: %v", u.url, err)
		case <-tick.C:
		}
	}
}

// Stop closes the HTTP server and waits for it to end. Call it once.
func (u *Server) Stop() error {
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
