package devserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"

	"github.com/archiveflow/archiveflow/internal/freeport"
	"github.com/archiveflow/archiveflow/internal/searchattr"
)

const (
	clusterName = "active"
	storeName   = "sqlite-default"
	// internalIP is where the history, matching and worker services listen.
	internalIP = "127.0.0.1"
)

// ports are the gRPC ports of one server instance: Temporal runs four
// services in-process, each with its own gRPC server.
type ports struct {
	frontend, history, matching, worker int
}

// allocatePorts picks free ports for every service; frontend is kept when
// the caller fixed it. Internal services listen on 127.0.0.1 only.
func allocatePorts(bindIP string, frontend int) (ports, error) {
	if frontend == 0 {
		p, err := freeport.Port(bindIP)
		if err != nil {
			return ports{}, err
		}
		frontend = p
	} else if err := freeport.CheckFree("frontend", bindIP, frontend); err != nil {
		return ports{}, err
	}
	free, err := freeport.Ports(internalIP, 3, frontend)
	if err != nil {
		return ports{}, err
	}
	return ports{frontend: frontend, history: free[0], matching: free[1], worker: free[2]}, nil
}

// staticHosts is the service membership of the single-process cluster.
// Static membership replaces ringpop gossip: nothing to join at start, and
// no membership rows in the database that a restarted server would take
// for live peers (with ringpop, a restart on a persistent database keeps
// routing to the previous run's dead hosts until they time out).
func staticHosts(dialIP string, p ports) map[primitives.ServiceName]static.Hosts {
	addr := func(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
	return map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(addr(dialIP, p.frontend)),
		primitives.HistoryService:  static.SingleLocalHost(addr(internalIP, p.history)),
		primitives.MatchingService: static.SingleLocalHost(addr(internalIP, p.matching)),
		primitives.WorkerService:   static.SingleLocalHost(addr(internalIP, p.worker)),
	}
}

// sqlConfig returns the SQLite persistence config: a file in dataDir, or a
// uniquely named shared-cache in-memory database.
func sqlConfig(dataDir string) (*config.SQL, error) {
	c := &config.SQL{PluginName: sqliteplugin.PluginName}
	if dataDir == "" {
		name, err := randomName("archiveflow-dev-")
		if err != nil {
			return nil, err
		}
		c.DatabaseName = name
		c.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		return c, nil
	}
	c.DatabaseName = filepath.Join(dataDir, dbFileName)
	// WAL: readers do not block the writer and a commit is one sequential
	// append; synchronous=normal is durable across process crashes (the
	// fault drills kill the server, not the machine).
	c.ConnectAttributes = map[string]string{
		"mode":         "rwc",
		"journal_mode": "wal",
		"synchronous":  "normal",
		"busy_timeout": "10000",
	}
	return c, nil
}

// prepareDatabase creates the schema in a new database file and the
// namespace (with archiveflow's search attributes) if it does not exist.
// In-memory databases get their schema from the SQLite plugin itself.
func prepareDatabase(c *config.SQL, namespace string) error {
	if c.ConnectAttributes["mode"] != "memory" {
		if err := setupSchemaIfNew(c); err != nil {
			return err
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, namespace, false, searchattr.Map())
	if err != nil {
		return fmt.Errorf("namespace %s config: %w", namespace, err)
	}
	if err := sqliteschema.CreateNamespaces(c, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	return nil
}

// setupSchemaIfNew creates the schema when the database file does not
// exist yet. A half-created file is removed so the next start retries
// from scratch instead of running on a partial schema.
func setupSchemaIfNew(c *config.SQL) error {
	path := c.DatabaseName
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("stat database %s: %w", path, err)
	}
	if err := sqliteschema.SetupSchema(c); err != nil {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(path + suffix)
		}
		return fmt.Errorf("create schema in %s: %w", path, err)
	}
	return nil
}

// serverConfig is the static Temporal config of a single-host cluster on
// SQLite with every service in this process.
func serverConfig(r resolved, p ports, sql *config.SQL) *config.Config {
	frontendAddr := net.JoinHostPort(r.dialIP, strconv.Itoa(p.frontend))
	c := &config.Config{}
	c.Persistence.DefaultStore = storeName
	c.Persistence.VisibilityStore = storeName
	c.Persistence.NumHistoryShards = 1
	c.Persistence.DataStores = map[string]config.DataStore{storeName: {SQL: sql}}

	c.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontendAddr,
			},
		},
	}
	c.DCRedirectionPolicy.Policy = "noop"

	frontend := config.Service{}
	frontend.RPC.GRPCPort = p.frontend
	frontend.RPC.BindOnIP = r.bindIP
	c.Services = map[string]config.Service{
		"frontend": frontend,
		"history":  localService(p.history),
		"matching": localService(p.matching),
		"worker":   localService(p.worker),
	}

	c.Archival.History.State = "disabled"
	c.Archival.Visibility.State = "disabled"
	c.NamespaceDefaults.Archival.History.State = "disabled"
	c.NamespaceDefaults.Archival.Visibility.State = "disabled"
	c.PublicClient.HostPort = frontendAddr
	return c
}

func localService(grpcPort int) config.Service {
	s := config.Service{}
	s.RPC.GRPCPort = grpcPort
	s.RPC.BindOnIP = internalIP
	return s
}

func randomName(prefix string) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random database name: %w", err)
	}
	return prefix + hex.EncodeToString(b), nil
}
