//go:build dev || cluster

package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/archiveflow/archiveflow/internal/composefile"
)

// Cluster is PostgreSQL with Temporal's schemas and a Temporal server
// process, configured by docker-compose.yml.
type Cluster struct {
	Bins      Binaries
	Project   *types.Project
	Postgres  *Postgres
	Temporal  *Temporal
	Namespace string
	// Dir holds the logs and the servers' files.
	Dir string
	// Took is how long Start took, by phase.
	Took struct{ Postgres, Schema, Temporal time.Duration }

	temporalOpts TemporalOptions
}

// Options configures Start.
type Options struct {
	// Durable runs PostgreSQL with fsync (see PostgresOptions.Durable).
	Durable bool
}

// Start loads docker-compose.yml, starts PostgreSQL with the compose
// database service's user and password, runs the schema service's script
// and starts the Temporal server with the temporal service's settings,
// creating the setup service's namespace. On error nothing is left running.
func Start(ctx context.Context, bins Binaries, dir string, o Options) (*Cluster, error) {
	p, err := composefile.Load(ctx, RepoFile("docker-compose.yml"))
	if err != nil {
		return nil, err
	}
	env, dc, err := composefile.TemporalServer(p)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Bins: bins, Project: p, Dir: dir, Namespace: serviceEnv(p, composefile.ServiceSetup, "NAMESPACE", "default")}

	begin := time.Now()
	c.Postgres, err = StartPostgres(ctx, PostgresOptions{
		User:     serviceEnv(p, composefile.ServicePostgres, "POSTGRES_USER", "postgres"),
		Password: serviceEnv(p, composefile.ServicePostgres, "POSTGRES_PASSWORD", ""),
		Durable:  o.Durable,
	})
	if err != nil {
		return nil, err
	}
	c.Took.Postgres = time.Since(begin)

	begin = time.Now()
	if err := SetupSchema(ctx, p, c.Postgres, bins, dir); err != nil {
		return nil, errors.Join(err, c.Postgres.Stop())
	}
	c.Took.Schema = time.Since(begin)

	begin = time.Now()
	c.temporalOpts = TemporalOptions{
		Bin: bins.TemporalServer, Env: env, DynamicConfig: dc,
		Postgres: c.Postgres, Namespace: c.Namespace, Dir: dir,
	}
	c.Temporal, err = StartTemporal(ctx, c.temporalOpts)
	if err != nil {
		return nil, errors.Join(err, c.Postgres.Stop())
	}
	c.Took.Temporal = time.Since(begin)
	return c, nil
}

// StartPeer starts another Temporal server process with the same settings
// and database on other ports: the two form one Temporal cluster (their
// services find each other through the membership table in PostgreSQL), as
// several temporal containers of one deployment do. The caller stops it.
func (c *Cluster) StartPeer(ctx context.Context, name string) (*Temporal, error) {
	o := c.temporalOpts
	o.Name = name
	return StartTemporal(ctx, o)
}

// Stop stops the Temporal server and PostgreSQL.
func (c *Cluster) Stop() error {
	return errors.Join(c.Temporal.Stop(), c.Postgres.Stop())
}

// String describes the cluster for a test log.
func (c *Cluster) String() string {
	return fmt.Sprintf("PostgreSQL %s (%s), schema %s, %s (started in %s)",
		c.Postgres.Addr(), c.Took.Postgres.Round(time.Millisecond), c.Took.Schema.Round(time.Millisecond),
		c.Temporal, c.Took.Temporal.Round(time.Millisecond))
}

// serviceEnv is a variable of a compose service's environment, or def.
func serviceEnv(p *types.Project, service, key, def string) string {
	if s, ok := p.Services[service]; ok {
		if v := s.Environment[key]; v != nil && *v != "" {
			return *v
		}
	}
	return def
}
