package composefile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository root, where docker-compose.yml and go.mod live.
const root = "../.."

func moduleVersions(t *testing.T) Versions {
	t.Helper()
	v, err := ModuleVersions(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	return v
}

func load(t *testing.T, file string) (*types.Project, error) {
	t.Helper()
	return Load(context.Background(), file)
}

// deployment copies docker-compose.yml, go.mod and deploy/ into a
// temporary directory and returns it.
func deployment(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"docker-compose.yml", "go.mod"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o644))
	}
	require.NoError(t, os.CopyFS(filepath.Join(dir, "deploy"), os.DirFS(filepath.Join(root, "deploy"))))
	return dir
}

// edit replaces old with new in dir/file, failing when old is absent.
func edit(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Contains(t, string(data), old, "%s must contain the text the case edits", file)
	require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644))
}

func TestTheComposeFilePassesEveryCheck(t *testing.T) {
	v := moduleVersions(t)
	p, err := load(t, filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	require.NoError(t, Check(p, v))

	assert.Equal(t, ImageServer+":"+v.Server, p.Services[ServiceTemporal].Image)
	assert.Equal(t, ImageUI+":"+v.UI, p.Services[ServiceUI].Image)
	pools, err := Pools(p)
	require.NoError(t, err)
	require.NotEmpty(t, pools)
	assert.Equal(t, "default", pools[0].Name)
}

func TestModuleVersionsReadsGoMod(t *testing.T) {
	v := moduleVersions(t)
	assert.Regexp(t, `^1\.\d+\.\d+$`, v.Server, "go.temporal.io/server without the v")
	assert.Regexp(t, `^2\.\d+\.\d+$`, v.UI, "ui-server without the v")

	bad := filepath.Join(t.TempDir(), "go.mod")
	require.NoError(t, os.WriteFile(bad, []byte("module x\n\ngo 1.26\n"), 0o644))
	_, err := ModuleVersions(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), ModuleServer)
}

func TestTemporalServerGivesEnvAndDynamicConfig(t *testing.T) {
	p, err := load(t, filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	env, dc, err := TemporalServer(p)
	require.NoError(t, err)
	assert.Equal(t, "postgres12", env["DB"])
	assert.True(t, strings.HasPrefix(dc.Path, TemporalWorkDir+"/"), dc.Path)
	assert.Contains(t, string(dc.Content), "history.transferProcessorMaxPollRPS")
}

// TestBrokenCopiesFail proves the checks can fail: each case breaks a copy
// of the deployment (docker-compose.yml, deploy/, or go.mod) in one way,
// loads and checks the copy exactly as TestTheComposeFilePassesEveryCheck
// checks the real files, and names the error it must produce.
func TestBrokenCopiesFail(t *testing.T) {
	cases := []struct {
		name string
		// files edits the copied deployment directory.
		files func(t *testing.T, dir string, v Versions)
		// project edits the loaded project.
		project  func(p *types.Project)
		loadErr  string // the loader must fail with this
		checkErr string // else Check must fail with this
	}{
		{
			name: "server image drifted",
			files: func(t *testing.T, dir string, v Versions) {
				edit(t, dir, "docker-compose.yml", ImageServer+":"+v.Server, ImageServer+":1.31.0")
			},
			checkErr: "service temporal: image temporalio/server:1.31.0 drifted from go.mod",
		},
		{
			name: "admin-tools image drifted",
			files: func(t *testing.T, dir string, v Versions) {
				edit(t, dir, "docker-compose.yml", ImageAdminTools+":"+v.Server, ImageAdminTools+":1.31.0")
			},
			checkErr: "image temporalio/admin-tools:1.31.0 drifted from go.mod",
		},
		{
			name: "UI image drifted",
			files: func(t *testing.T, dir string, v Versions) {
				edit(t, dir, "docker-compose.yml", ImageUI+":"+v.UI, ImageUI+":2.49.1")
			},
			checkErr: "service temporal-ui: image temporalio/ui:2.49.1 drifted from go.mod",
		},
		{
			name: "go.mod moved to a newer server",
			files: func(t *testing.T, dir string, v Versions) {
				edit(t, dir, "go.mod", ModuleServer+" v"+v.Server, ModuleServer+" v1.99.0")
			},
			checkErr: "want temporalio/server:1.99.0",
		},
		{
			name: "go.mod moved to a newer UI",
			files: func(t *testing.T, dir string, v Versions) {
				edit(t, dir, "go.mod", ModuleUI+" v"+v.UI, ModuleUI+" v2.99.0")
			},
			checkErr: "want temporalio/ui:2.99.0",
		},
		{
			name: "image not pinned",
			project: func(p *types.Project) {
				s := p.Services[ServiceRedis]
				s.Image = "redis"
				p.Services[ServiceRedis] = s
			},
			checkErr: "service redis: image redis must be pinned",
		},
		{
			name: "service with neither image nor build",
			project: func(p *types.Project) {
				p.Services["extra"] = types.ServiceConfig{Name: "extra"}
			},
			checkErr: "service extra: needs an image or a build",
		},
		{
			name: "env file missing",
			files: func(t *testing.T, dir string, _ Versions) {
				require.NoError(t, os.Remove(filepath.Join(dir, "deploy", "archiveflow.env")))
			},
			loadErr: "archiveflow.env",
		},
		{
			name: "config file missing",
			files: func(t *testing.T, dir string, _ Versions) {
				require.NoError(t, os.Remove(filepath.Join(dir, "deploy", "temporal-dynamicconfig.yaml")))
			},
			checkErr: "temporal-dynamicconfig.yaml must exist",
		},
		{
			name: "bad YAML",
			files: func(t *testing.T, dir string, _ Versions) {
				edit(t, dir, "docker-compose.yml", "services:\n", "services: [\n")
			},
			loadErr: "docker-compose.yml",
		},
		{
			name: "a key Compose does not know",
			files: func(t *testing.T, dir string, _ Versions) {
				edit(t, dir, "docker-compose.yml", "  redis:\n", "  redis:\n    replicas_please: 2\n")
			},
			loadErr: "replicas_please",
		},
		{
			name: "a service mounts an undeclared volume",
			files: func(t *testing.T, dir string, _ Versions) {
				edit(t, dir, "docker-compose.yml", "      - redis:/data\n", "      - redisdata:/data\n")
			},
			loadErr: "redisdata",
		},
		{
			name: "pool without a worker service",
			files: func(t *testing.T, dir string, _ Versions) {
				edit(t, dir, "deploy/archiveflow.env", `"slots":8}]`, `"slots":8},{"name":"browser","task_queue":"browser","slots":2}]`)
			},
			checkErr: "pool browser (task queue browser): no worker service worker-browser",
		},
		{
			name: "worker service for no pool",
			project: func(p *types.Project) {
				s := p.Services[WorkerPrefix+"default"]
				s.Name = WorkerPrefix + "ghost"
				p.Services[s.Name] = s
			},
			checkErr: "service worker-ghost: pool ghost is not in ARCHIVEFLOW_POOLS",
		},
		{
			name: "invalid pools",
			files: func(t *testing.T, dir string, _ Versions) {
				edit(t, dir, "deploy/archiveflow.env", `"slots":8}]`, `"slots":0}]`)
			},
			checkErr: "slots",
		},
		{
			name: "worker service runs another pool",
			project: func(p *types.Project) {
				s := p.Services[WorkerPrefix+"default"]
				s.Command = types.ShellCommand{"--pool", "other"}
				p.Services[s.Name] = s
			},
			checkErr: "service worker-default: must run `workers --pool default`",
		},
		{
			name: "worker service cannot scale",
			project: func(p *types.Project) {
				s := p.Services[WorkerPrefix+"default"]
				s.ContainerName = "worker"
				p.Services[s.Name] = s
			},
			checkErr: "container_name prevents `--scale worker-default=N`",
		},
		{
			name: "workers pointed at another Redis",
			files: func(t *testing.T, dir string, _ Versions) {
				edit(t, dir, "deploy/archiveflow.env", "redis://redis:6379/0", "redis://127.0.0.1:6379/0")
			},
			checkErr: "service worker-default: ARCHIVEFLOW_REDIS_URL must point at the redis service",
		},
		{
			name: "no health check on redis",
			project: func(p *types.Project) {
				s := p.Services[ServiceRedis]
				s.HealthCheck = nil
				p.Services[ServiceRedis] = s
			},
			checkErr: "service redis: needs a health check",
		},
		{
			name: "PostgreSQL data not on a volume",
			project: func(p *types.Project) {
				s := p.Services[ServicePostgres]
				s.Volumes = nil
				p.Services[ServicePostgres] = s
			},
			checkErr: "service postgresql: /var/lib/postgresql/data must be on a named volume",
		},
		{
			name: "dynamic config not where the server reads it",
			project: func(p *types.Project) {
				s := p.Services[ServiceTemporal]
				other := "config/dynamicconfig/other.yaml"
				s.Environment["DYNAMIC_CONFIG_FILE_PATH"] = &other
				p.Services[ServiceTemporal] = s
			},
			checkErr: "no config of the service is mounted there",
		},
		{
			name: "search attributes drifted",
			project: func(p *types.Project) {
				s := p.Services[ServiceSetup]
				sa := "ArchiveflowIdent=Keyword"
				s.Environment["SEARCH_ATTRIBUTES"] = &sa
				p.Services[ServiceSetup] = s
			},
			checkErr: "service temporal-setup: SEARCH_ATTRIBUTES must be",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := deployment(t)
			if tc.files != nil {
				tc.files(t, dir, moduleVersions(t))
			}
			v, err := ModuleVersions(filepath.Join(dir, "go.mod"))
			require.NoError(t, err)
			p, err := load(t, filepath.Join(dir, "docker-compose.yml"))
			if tc.loadErr != "" {
				require.Error(t, err, "the loader must refuse the broken copy")
				assert.Contains(t, err.Error(), tc.loadErr)
				return
			}
			require.NoError(t, err)
			if tc.project != nil {
				tc.project(p)
			}
			err = Check(p, v)
			require.Error(t, err, "Check must fail")
			assert.Contains(t, err.Error(), tc.checkErr)
		})
	}
}
