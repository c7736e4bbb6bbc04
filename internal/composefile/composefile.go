// Package composefile owns the checks of docker-compose.yml, the production
// topology archiveflow ships (Temporal on PostgreSQL, its Web UI, Redis,
// one worker service per pool): it loads the file with compose-spec's own
// loader (github.com/compose-spec/compose-go/v2, what `docker compose
// config` runs), checks what archiveflow needs from it — images that
// resolve and match the Temporal server and UI versions in go.mod, env
// files and configs that exist, a scalable worker service per pool, health
// checks on the stateful services, named volumes for their data — and
// hands the Temporal services' settings to the cluster suite
// (internal/cluster), which runs them for real.
package composefile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	enumspb "go.temporal.io/api/enums/v1"
	"golang.org/x/mod/modfile"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// Service names the checks and the cluster suite rely on.
const (
	ServicePostgres = "postgresql"
	ServiceSchema   = "temporal-schema"
	ServiceTemporal = "temporal"
	ServiceSetup    = "temporal-setup"
	ServiceUI       = "temporal-ui"
	ServiceRedis    = "redis"
	// WorkerPrefix + pool name is the worker service of a pool.
	WorkerPrefix = "worker-"
)

// Images of the Temporal parts and the modules whose version they must
// carry.
const (
	ImageServer     = "temporalio/server"
	ImageAdminTools = "temporalio/admin-tools"
	ImageUI         = "temporalio/ui"

	ModuleServer = "go.temporal.io/server"
	ModuleUI     = "github.com/temporalio/ui-server/v2"
)

// TemporalWorkDir is the working directory of the temporalio/server image:
// a relative DYNAMIC_CONFIG_FILE_PATH is resolved against it.
const TemporalWorkDir = "/etc/temporal"

// Load loads the compose file at file with compose-spec's loader as
// `docker compose config` does: schema validation, interpolation, env
// files, extends and consistency (services referring to undeclared
// volumes, configs or networks fail). Every profile is enabled and no
// variable of the caller's environment is used, so the result does not
// depend on who loads it.
func Load(ctx context.Context, file string) (*types.Project, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("compose file %s: %w", file, err)
	}
	opts, err := cli.NewProjectOptions([]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)),
		cli.WithProfiles([]string{"*"}),
	)
	if err != nil {
		return nil, fmt.Errorf("compose file %s: %w", file, err)
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("compose file %s: %w", file, err)
	}
	return p, nil
}

// Versions are the Temporal server and Web UI versions the project builds
// and tests against, without the leading "v" (the image tag form).
type Versions struct {
	Server string // go.temporal.io/server, e.g. "1.32.1"
	UI     string // github.com/temporalio/ui-server/v2, e.g. "2.54.1"
}

// ModuleVersions reads Versions from the go.mod file at file.
func ModuleVersions(file string) (Versions, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Versions{}, fmt.Errorf("read go.mod: %w", err)
	}
	mf, err := modfile.ParseLax(file, data, nil)
	if err != nil {
		return Versions{}, fmt.Errorf("parse %s: %w", file, err)
	}
	var v Versions
	for _, r := range mf.Require {
		switch r.Mod.Path {
		case ModuleServer:
			v.Server = strings.TrimPrefix(r.Mod.Version, "v")
		case ModuleUI:
			v.UI = strings.TrimPrefix(r.Mod.Version, "v")
		}
	}
	if v.Server == "" || v.UI == "" {
		return Versions{}, fmt.Errorf("%s: must require %s and %s (found %q and %q)", file, ModuleServer, ModuleUI, v.Server, v.UI)
	}
	return v, nil
}

// Check returns every problem of the project, joined, or nil. Each names
// the service (or file) and the rule it breaks.
func Check(p *types.Project, v Versions) error {
	var errs []error
	errs = append(errs, checkImages(p, v)...)
	errs = append(errs, checkFiles(p)...)
	errs = append(errs, checkStateful(p)...)
	errs = append(errs, checkWorkers(p)...)
	errs = append(errs, checkTemporal(p)...)
	return errors.Join(errs...)
}

// pinnedImages are the images whose tag must be the go.mod version.
func pinnedImages(v Versions) map[string]string {
	return map[string]string{ImageServer: v.Server, ImageAdminTools: v.Server, ImageUI: v.UI}
}

// checkImages: every service has an image or a build; an image no service
// builds is a pinned registry reference; the Temporal images carry the
// go.mod versions.
func checkImages(p *types.Project, v Versions) []error {
	var errs []error
	built := map[string]bool{}
	for _, s := range p.Services {
		if s.Build != nil && s.Image != "" {
			built[s.Image] = true
		}
	}
	pinned := pinnedImages(v)
	used := map[string]bool{}
	for _, name := range sortedNames(p) {
		s := p.Services[name]
		if s.Image == "" && s.Build == nil {
			errs = append(errs, fmt.Errorf("service %s: needs an image or a build", name))
			continue
		}
		if s.Build != nil {
			errs = append(errs, checkBuild(name, s.Build)...)
		}
		if s.Image == "" || built[s.Image] {
			continue
		}
		repo, tag := splitImage(s.Image)
		switch {
		case tag == "" || tag == "latest":
			errs = append(errs, fmt.Errorf("service %s: image %s must be pinned to a version tag (or built by a service)", name, s.Image))
		case pinned[repo] != "" && tag != pinned[repo]:
			errs = append(errs, fmt.Errorf("service %s: image %s drifted from go.mod: want %s:%s (the version archiveflow builds and tests against)", name, s.Image, repo, pinned[repo]))
		}
		used[repo] = true
	}
	for _, repo := range []string{ImageServer, ImageAdminTools, ImageUI} {
		if !used[repo] {
			errs = append(errs, fmt.Errorf("no service runs %s:%s", repo, pinned[repo]))
		}
	}
	return errs
}

// checkBuild: the build context exists and so does the Dockerfile unless
// it is inline.
func checkBuild(service string, b *types.BuildConfig) []error {
	if strings.Contains(b.Context, "://") || strings.HasPrefix(b.Context, "git@") {
		return nil // a remote context resolves at build time
	}
	var errs []error
	if fi, err := os.Stat(b.Context); err != nil || !fi.IsDir() {
		errs = append(errs, fmt.Errorf("service %s: build context %s must be an existing directory", service, b.Context))
	}
	if b.DockerfileInline == "" {
		df := b.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		if !filepath.IsAbs(df) {
			df = filepath.Join(b.Context, df)
		}
		if _, err := os.Stat(df); err != nil {
			errs = append(errs, fmt.Errorf("service %s: Dockerfile %s must exist (or use dockerfile_inline)", service, df))
		}
	}
	return errs
}

// checkFiles: env files and config files exist; every config has a file
// or content.
func checkFiles(p *types.Project) []error {
	var errs []error
	for _, name := range sortedNames(p) {
		for _, ef := range p.Services[name].EnvFiles {
			if _, err := os.Stat(ef.Path); err != nil {
				errs = append(errs, fmt.Errorf("service %s: env file %s must exist", name, ef.Path))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Configs)) {
		c := p.Configs[name]
		switch {
		case bool(c.External):
		case c.File != "":
			if _, err := os.Stat(c.File); err != nil {
				errs = append(errs, fmt.Errorf("config %s: file %s must exist", name, c.File))
			}
		case c.Content == "" && c.Environment == "":
			errs = append(errs, fmt.Errorf("config %s: needs a file, content or environment", name))
		}
	}
	return errs
}

// statefulData are the stateful services and where each keeps its data.
var statefulData = map[string]string{
	ServicePostgres: "/var/lib/postgresql/data",
	ServiceRedis:    "/data",
}

// checkStateful: PostgreSQL, Redis and Temporal have health checks (the
// services after them wait for service_healthy); the databases keep their
// data on named volumes; every service another waits for as healthy has a
// health check.
func checkStateful(p *types.Project) []error {
	var errs []error
	for _, name := range []string{ServicePostgres, ServiceRedis, ServiceTemporal} {
		s, ok := p.Services[name]
		if !ok {
			errs = append(errs, fmt.Errorf("service %s: missing", name))
			continue
		}
		if !hasHealthCheck(s) {
			errs = append(errs, fmt.Errorf("service %s: needs a health check (stateful; others wait for it to be healthy)", name))
		}
		if target, ok := statefulData[name]; ok && !mountsNamedVolume(p, s, target) {
			errs = append(errs, fmt.Errorf("service %s: %s must be on a named volume (declared under the top-level volumes)", name, target))
		}
	}
	for _, name := range sortedNames(p) {
		for dep, d := range p.Services[name].DependsOn {
			if d.Condition != types.ServiceConditionHealthy {
				continue
			}
			if ds, ok := p.Services[dep]; ok && !hasHealthCheck(ds) {
				errs = append(errs, fmt.Errorf("service %s: waits for %s to be healthy, which has no health check", name, dep))
			}
		}
	}
	return errs
}

func hasHealthCheck(s types.ServiceConfig) bool {
	return s.HealthCheck != nil && !s.HealthCheck.Disable && len(s.HealthCheck.Test) > 0 && s.HealthCheck.Test[0] != "NONE"
}

// mountsNamedVolume reports whether s mounts a volume declared in the
// project at target.
func mountsNamedVolume(p *types.Project, s types.ServiceConfig, target string) bool {
	for _, m := range s.Volumes {
		if m.Type == types.VolumeTypeVolume && m.Target == target {
			if _, ok := p.Volumes[m.Source]; ok {
				return true
			}
		}
	}
	return false
}

// Pools returns the pools of ARCHIVEFLOW_POOLS as the worker services see
// it. Every service that sets it must set the same value.
func Pools(p *types.Project) ([]config.Pool, error) {
	var raw, from string
	for _, name := range sortedNames(p) {
		v := p.Services[name].Environment["ARCHIVEFLOW_POOLS"]
		if v == nil {
			continue
		}
		if raw != "" && *v != raw {
			return nil, fmt.Errorf("service %s: ARCHIVEFLOW_POOLS differs from service %s's: every worker and the starter must see the same pools", name, from)
		}
		raw, from = *v, name
	}
	if raw == "" {
		return nil, errors.New("no service sets ARCHIVEFLOW_POOLS: the worker services need their pools")
	}
	var pools []config.Pool
	if err := json.Unmarshal([]byte(raw), &pools); err != nil {
		return nil, fmt.Errorf("ARCHIVEFLOW_POOLS %s: must be a JSON list of pools: %w", raw, err)
	}
	cfg := config.Default()
	cfg.Pools = pools
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ARCHIVEFLOW_POOLS %s: %w", raw, err)
	}
	return pools, nil
}

// checkWorkers: one scalable worker service per pool, running that pool,
// after the setup and Redis, with the archive dir on a named volume; no
// worker service for a pool that does not exist.
func checkWorkers(p *types.Project) []error {
	pools, err := Pools(p)
	if err != nil {
		return []error{err}
	}
	var errs []error
	known := map[string]bool{}
	for _, pool := range pools {
		known[pool.Name] = true
		name := WorkerPrefix + pool.Name
		s, ok := p.Services[name]
		if !ok {
			errs = append(errs, fmt.Errorf("pool %s (task queue %s): no worker service %s", pool.Name, pool.TaskQueue, name))
			continue
		}
		if got := servedPool(s); got != pool.Name {
			errs = append(errs, fmt.Errorf("service %s: must run `workers --pool %s`, runs %q", name, pool.Name, strings.Join(s.Command, " ")))
		}
		if s.ContainerName != "" {
			errs = append(errs, fmt.Errorf("service %s: container_name prevents `--scale %s=N`", name, name))
		}
		for _, port := range s.Ports {
			if port.Published != "" {
				errs = append(errs, fmt.Errorf("service %s: published port %s prevents `--scale %s=N`", name, port.Published, name))
			}
		}
		if d, ok := s.DependsOn[ServiceSetup]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
			errs = append(errs, fmt.Errorf("service %s: must depend on %s (condition service_completed_successfully): workflows need the search attributes", name, ServiceSetup))
		}
		if d, ok := s.DependsOn[ServiceRedis]; !ok || d.Condition != types.ServiceConditionHealthy {
			errs = append(errs, fmt.Errorf("service %s: must depend on %s (condition service_healthy)", name, ServiceRedis))
		}
		if addr := s.Environment["ARCHIVEFLOW_TEMPORAL_HOST_PORT"]; addr == nil || !strings.HasPrefix(*addr, ServiceTemporal+":") {
			errs = append(errs, fmt.Errorf("service %s: ARCHIVEFLOW_TEMPORAL_HOST_PORT must be %s:PORT", name, ServiceTemporal))
		}
		if u := s.Environment["ARCHIVEFLOW_REDIS_URL"]; u == nil || !strings.Contains(*u, "://"+ServiceRedis+":") {
			errs = append(errs, fmt.Errorf("service %s: ARCHIVEFLOW_REDIS_URL must point at the %s service (redis://%s:PORT/DB)", name, ServiceRedis, ServiceRedis))
		}
		if dir := s.Environment["ARCHIVEFLOW_ARCHIVE_DIR"]; dir == nil || !mountsNamedVolume(p, s, *dir) {
			errs = append(errs, fmt.Errorf("service %s: ARCHIVEFLOW_ARCHIVE_DIR must be set and on a named volume (the archive outlives the container)", name))
		}
	}
	for _, name := range sortedNames(p) {
		if !strings.HasPrefix(name, WorkerPrefix) {
			continue
		}
		if pool := strings.TrimPrefix(name, WorkerPrefix); !known[pool] {
			errs = append(errs, fmt.Errorf("service %s: pool %s is not in ARCHIVEFLOW_POOLS", name, pool))
		}
	}
	return errs
}

// servedPool is the pool a worker service's command names with --pool.
func servedPool(s types.ServiceConfig) string {
	for i, a := range s.Command {
		if a == "--pool" && i+1 < len(s.Command) {
			return s.Command[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--pool="); ok {
			return v
		}
	}
	return ""
}

// checkTemporal: the server runs on PostgreSQL with its dynamic config
// mounted where DYNAMIC_CONFIG_FILE_PATH points; the UI talks to it; the
// setup registers exactly the search attributes of internal/searchattr.
func checkTemporal(p *types.Project) []error {
	var errs []error
	if _, _, err := TemporalServer(p); err != nil {
		errs = append(errs, err)
	}
	if ui, ok := p.Services[ServiceUI]; ok {
		if addr := ui.Environment["TEMPORAL_ADDRESS"]; addr == nil || !strings.HasPrefix(*addr, ServiceTemporal+":") {
			errs = append(errs, fmt.Errorf("service %s: TEMPORAL_ADDRESS must be %s:PORT", ServiceUI, ServiceTemporal))
		}
	} else {
		errs = append(errs, fmt.Errorf("service %s: missing", ServiceUI))
	}
	setup, ok := p.Services[ServiceSetup]
	if !ok {
		return append(errs, fmt.Errorf("service %s: missing", ServiceSetup))
	}
	var got []string
	if v := setup.Environment["SEARCH_ATTRIBUTES"]; v != nil {
		got = strings.Fields(*v)
	}
	if want := SearchAttributes(); !slices.Equal(got, want) {
		errs = append(errs, fmt.Errorf("service %s: SEARCH_ATTRIBUTES must be %q (internal/searchattr), is %q", ServiceSetup, want, got))
	}
	return errs
}

// SearchAttributes is searchattr.All in the NAME=Type form of the setup
// service (the `temporal operator search-attribute create` types).
func SearchAttributes() []string {
	out := make([]string, 0, len(searchattr.All))
	for _, d := range searchattr.All {
		t := "Unknown"
		switch d.Type {
		case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
			t = "Keyword"
		case enumspb.INDEXED_VALUE_TYPE_INT:
			t = "Int"
		}
		out = append(out, d.Name+"="+t)
	}
	return out
}

// TemporalServer returns the temporal service's environment and its dynamic
// config: the path DYNAMIC_CONFIG_FILE_PATH names inside the container
// (absolute) and the file's content, which must be mounted there by one of
// the service's configs.
func TemporalServer(p *types.Project) (env map[string]string, dynamicConfig DynamicConfig, err error) {
	s, ok := p.Services[ServiceTemporal]
	if !ok {
		return nil, DynamicConfig{}, fmt.Errorf("service %s: missing", ServiceTemporal)
	}
	env = map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	if db := env["DB"]; db != "postgres12" && db != "postgres12_pgx" {
		return nil, DynamicConfig{}, fmt.Errorf("service %s: DB must be postgres12 (PostgreSQL persistence and visibility), is %q", ServiceTemporal, db)
	}
	dc := env["DYNAMIC_CONFIG_FILE_PATH"]
	if dc == "" {
		return nil, DynamicConfig{}, fmt.Errorf("service %s: DYNAMIC_CONFIG_FILE_PATH must name archiveflow's dynamic config", ServiceTemporal)
	}
	if !path.IsAbs(dc) {
		dc = path.Join(TemporalWorkDir, dc)
	}
	for _, ref := range s.Configs {
		if ref.Target != dc {
			continue
		}
		c, ok := p.Configs[ref.Source]
		if !ok {
			break
		}
		content := []byte(c.Content)
		if c.File != "" {
			content, err = os.ReadFile(c.File)
			if err != nil {
				return nil, DynamicConfig{}, fmt.Errorf("service %s: config %s: %w", ServiceTemporal, ref.Source, err)
			}
		}
		return env, DynamicConfig{Path: dc, Content: content}, nil
	}
	return nil, DynamicConfig{}, fmt.Errorf("service %s: DYNAMIC_CONFIG_FILE_PATH is %s in the container, but no config of the service is mounted there", ServiceTemporal, dc)
}

// DynamicConfig is the Temporal server's dynamic config file.
type DynamicConfig struct {
	// Path is where the server reads it inside the container (absolute).
	Path string
	// Content is the file's content.
	Content []byte
}

// splitImage splits "repo:tag" (or "repo@digest") into repo and tag; a
// digest counts as a pinned tag.
func splitImage(image string) (repo, tag string) {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		return image[:i], image[i+1:]
	}
	slash := strings.LastIndexByte(image, '/')
	if i := strings.LastIndexByte(image, ':'); i > slash {
		return image[:i], image[i+1:]
	}
	return image, ""
}

func sortedNames(p *types.Project) []string {
	return slices.Sorted(maps.Keys(p.Services))
}
