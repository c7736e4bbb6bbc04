//go:build dev || cluster

package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/archiveflow/archiveflow/internal/freeport"
)

// EnvPostgresBin names the directory of initdb and pg_ctl; by default the
// newest /usr/lib/postgresql/NN/bin (Debian's postgresql package).
const EnvPostgresBin = "ARCHIVEFLOW_POSTGRES_BIN"

// PostgresOptions configures a throwaway PostgreSQL cluster.
type PostgresOptions struct {
	// User and Password of the superuser the cluster is created with
	// (docker-compose's POSTGRES_USER and POSTGRES_PASSWORD).
	User, Password string
	// Durable keeps PostgreSQL's defaults (fsync, synchronous commit). Off,
	// commits are not flushed to disk: a test cluster that dies with its
	// machine loses nothing anyone needs, and each commit costs no fsync.
	Durable bool
}

// Postgres is a running throwaway PostgreSQL cluster on loopback.
type Postgres struct {
	Host string
	Port int
	User string
	// Password of User.
	Password string

	bin  string
	data string
	log  string
	cred *syscall.Credential // nil: run as this process's user
}

// StartPostgres creates a cluster in a new directory under the system temp
// dir (initdb), starts it on a free loopback port without a Unix socket
// (pg_ctl) and returns once it accepts connections.
//
// PostgreSQL refuses to run as root. When this process is root (CI), the
// cluster's directory is given to the unprivileged user "nobody" and
// initdb, pg_ctl and the server run as that user; otherwise they run as
// the current user. Stop removes the directory.
func StartPostgres(ctx context.Context, o PostgresOptions) (*Postgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "archiveflow-postgres-")
	if err != nil {
		return nil, fmt.Errorf("postgres dir: %w", err)
	}
	pg := &Postgres{Host: "127.0.0.1", User: o.User, Password: o.Password, bin: bin,
		data: filepath.Join(root, "data"), log: filepath.Join(root, "postgres.log")}
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			_ = os.RemoveAll(root)
			return nil, err
		}
		pg.cred = cred
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("postgres dir: give it to uid %d: %w", cred.Uid, err)
		}
	}
	if err := pg.initdb(ctx, root, o.Durable); err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	// A free port may be taken between the pick and the bind; retry.
	for attempt := 0; ; attempt++ {
		pg.Port, err = freeport.Port(pg.Host)
		if err == nil {
			err = pg.pgctl(ctx, "start", "-w", "-t", "120", "-l", pg.log, "-o", pg.serverOptions())
		}
		if err == nil {
			return pg, nil
		}
		if attempt == 2 || ctx.Err() != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("start postgres: %w\n%s", err, tailFile(pg.log, 20))
		}
	}
}

// serverOptions are the server settings: loopback only, our port, no Unix
// socket (its default directory belongs to the postgres user).
func (pg *Postgres) serverOptions() string {
	return fmt.Sprintf("-c listen_addresses=%s -c port=%d -c unix_socket_directories=''", pg.Host, pg.Port)
}

// initdb creates the cluster with a password-protected superuser.
func (pg *Postgres) initdb(ctx context.Context, root string, durable bool) error {
	pwfile := filepath.Join(root, "pwfile")
	if err := os.WriteFile(pwfile, []byte(pg.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	defer func() { _ = os.Remove(pwfile) }()
	if pg.cred != nil {
		if err := os.Chown(pwfile, int(pg.cred.Uid), int(pg.cred.Gid)); err != nil {
			return fmt.Errorf("initdb: %w", err)
		}
	}
	args := []string{"-D", pg.data, "-U", pg.User, "--pwfile=" + pwfile, "--auth=scram-sha-256",
		"-E", "UTF8", "--locale=C", "--no-instructions"}
	if !durable {
		args = append(args, "--no-sync")
	}
	if err := pg.run(ctx, "initdb", args...); err != nil {
		return err
	}
	if durable {
		return nil
	}
	conf, err := os.OpenFile(filepath.Join(pg.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	_, err = conf.WriteString("\n# archiveflow cluster suite: a throwaway cluster\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
	return errors.Join(err, conf.Close())
}

func (pg *Postgres) pgctl(ctx context.Context, args ...string) error {
	return pg.run(ctx, "pg_ctl", append([]string{"-D", pg.data}, args...)...)
}

// run runs one of PostgreSQL's programs as the cluster's user.
func (pg *Postgres) run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(pg.bin, prog), args...)
	cmd.Dir = filepath.Dir(pg.data)
	cmd.Env = cleanEnv("LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

// Addr is host:port.
func (pg *Postgres) Addr() string { return net.JoinHostPort(pg.Host, strconv.Itoa(pg.Port)) }

// PID is the postmaster's process id (the first line of postmaster.pid).
func (pg *Postgres) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(pg.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("postgres pid: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("postgres pid: postmaster.pid starts with %q: %w", line, err)
	}
	return pid, nil
}

// Stop shuts the server down (fast: active connections are closed) and
// removes the cluster's directory.
func (pg *Postgres) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := pg.pgctl(ctx, "stop", "-w", "-m", "fast")
	return errors.Join(err, os.RemoveAll(filepath.Dir(pg.data)))
}

// postgresBin finds the directory of initdb and pg_ctl.
func postgresBin() (string, error) {
	if d := os.Getenv(EnvPostgresBin); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("PostgreSQL not found: no /usr/lib/postgresql/NN/bin/initdb and no initdb on PATH (apt-get install postgresql, or set %s)", EnvPostgresBin)
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// unprivileged is the user PostgreSQL runs as when we are root.
func unprivileged() (*syscall.Credential, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and user nobody does not exist: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user nobody: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
