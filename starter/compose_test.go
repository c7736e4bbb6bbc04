package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"gopkg.in/yaml.v3"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// composeFile is the part of docker-compose.yml these tests check.
type composeFile struct {
	Services map[string]struct {
		Image         string            `yaml:"image"`
		ContainerName string            `yaml:"container_name"`
		Ports         []string          `yaml:"ports"`
		Environment   map[string]string `yaml:"environment"`
		Command       []string          `yaml:"command"`
		Build         *struct {
			Context          string `yaml:"context"`
			DockerfileInline string `yaml:"dockerfile_inline"`
		} `yaml:"build"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
	Configs map[string]struct {
		Content string `yaml:"content"`
	} `yaml:"configs"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(data, &c))
	return c
}

func TestComposeRunsTemporalOnPostgresWithUIAndRedis(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"postgresql", "temporal-schema", "temporal", "temporal-setup", "temporal-ui", "redis"} {
		assert.Contains(t, c.Services, name)
	}
	assert.Equal(t, "postgres12", c.Services["temporal"].Environment["DB"])
	assert.Equal(t, "temporal:7233", c.Services["temporal-ui"].Environment["TEMPORAL_ADDRESS"])
	dyn := c.Configs["temporal-dynamic-config"].Content
	assert.Contains(t, dyn, "history.transferProcessorMaxPollRPS")
	assert.Contains(t, dyn, "history.timerProcessorMaxPollRPS")
}

func TestComposeRegistersExactlyTheSearchAttributes(t *testing.T) {
	c := loadCompose(t)
	typeName := map[enumspb.IndexedValueType]string{
		enumspb.INDEXED_VALUE_TYPE_KEYWORD: "Keyword",
		enumspb.INDEXED_VALUE_TYPE_INT:     "Int",
	}
	var want []string
	for _, d := range searchattr.All {
		want = append(want, d.Name+"="+typeName[d.Type])
	}
	got := strings.Fields(c.Services["temporal-setup"].Environment["SEARCH_ATTRIBUTES"])
	assert.Equal(t, want, got)
}

func TestComposeHasOneScalableWorkerServicePerPool(t *testing.T) {
	c := loadCompose(t)
	def := config.Default()
	var pools []struct {
		Name      string `json:"name"`
		TaskQueue string `json:"task_queue"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.Services["worker-default"].Environment["ARCHIVEFLOW_POOLS"]), &pools))
	require.Len(t, pools, len(def.Pools))
	for i, p := range def.Pools {
		assert.Equal(t, p.Name, pools[i].Name)
		assert.Equal(t, p.TaskQueue, pools[i].TaskQueue)
		s, ok := c.Services["worker-"+p.Name]
		require.True(t, ok, "no service for pool %s", p.Name)
		assert.Empty(t, s.ContainerName, "a container_name prevents --scale")
		assert.Empty(t, s.Ports, "host ports prevent --scale")
		assert.Equal(t, []string{"--pool", p.Name}, s.Command)
		require.NotNil(t, s.Build)
		assert.Contains(t, s.Build.DockerfileInline, "go build")
		assert.Contains(t, s.Build.DockerfileInline, "./workers")
		assert.Equal(t, "service_completed_successfully", s.DependsOn["temporal-setup"].Condition)
		assert.Equal(t, "redis://redis:6379/0", s.Environment["ARCHIVEFLOW_REDIS_URL"])
	}
}
