package cluster

import (
	"strconv"
	"testing"
)

func TestIdentityTorchEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		rank int // -1: no identity
		ws   int
	}{
		{"rank and world size alone", map[string]string{"RANK": "3", "WORLD_SIZE": "8"}, 3, 8},
		{"rank and local rank", map[string]string{"RANK": "5", "LOCAL_RANK": "1"}, 5, 0},
		{"torchrun", map[string]string{"RANK": "2", "LOCAL_RANK": "2", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "x"}, 2, 4},
		{"rank alone is not a rank", map[string]string{"RANK": "1"}, -1, 0},
		{"non-numeric world size", map[string]string{"RANK": "1", "WORLD_SIZE": "many"}, -1, 0},
	} {
		j := Identity(func(k string) string { return c.env[k] })
		switch {
		case c.rank < 0 && j != nil:
			t.Errorf("%s: got identity %+v, want none", c.name, j)
		case c.rank >= 0 && (j == nil || j.Rank == nil || *j.Rank != c.rank):
			t.Errorf("%s: got %+v, want rank %d", c.name, j, c.rank)
		case c.rank >= 0 && c.ws > 0 && (j.WorldSize == nil || *j.WorldSize != c.ws):
			t.Errorf("%s: world size %v, want %d", c.name, j.WorldSize, c.ws)
		case c.rank >= 0 && RankSuffix(j) != strconv.Itoa(c.rank):
			t.Errorf("%s: suffix %q", c.name, RankSuffix(j))
		}
	}
}
