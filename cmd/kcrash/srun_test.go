package main

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"
)

// TestSlurmRealSrunTwoRanksMerge: `srun -n 2 kcrash run ...` on a real Slurm,
// rank 1 hits an illegal memory access and rank 0 then dies on a NCCL
// watchdog timeout; both bundles land in one shared --out, and kcrash merge
// names rank 1 as the first failure with rank 0 secondary.
func TestSlurmRealSrunTwoRanksMerge(t *testing.T) {
	realSlurm(t)
	out := t.TempDir()
	script := `if [ "$SLURM_PROCID" = 1 ]; then
  sleep 0.5
  echo "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
  exit 1
fi
sleep 3
echo "[rank0]:[E1202 11:52:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600066 milliseconds before timing out."
kill -ABRT $$`
	cmd := exec.Command("srun", "-n", "2", "--kill-on-bad-exit=0", "--time=2",
		kcrashBin(t), "run", "-q", "--out", out, "--skip-collectors", skipInTests, "--", "sh", "-c", script)
	done := make(chan []byte, 1)
	go func() { b, _ := cmd.CombinedOutput(); done <- b }()
	var srunOut []byte
	select {
	case srunOut = <-done:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatal("srun did not finish")
	}
	bundles := openBundles(t, out)
	if len(bundles) != 2 {
		t.Fatalf("%d bundles in --out, want 2; srun said:\n%s", len(bundles), srunOut)
	}
	r := runKcrash(t, 30*time.Second, nil, "merge", "--json", "--termination-log", "", out)
	if r.code != 0 {
		t.Fatalf("merge: exit %d: %s", r.code, r.stderr)
	}
	var m struct {
		FirstFailure struct {
			Rank    *int   `json:"rank"`
			Verdict string `json:"verdict"`
		} `json:"first_failure"`
		Ranks []struct {
			Rank      *int   `json:"rank"`
			Verdict   string `json:"verdict"`
			Secondary bool   `json:"secondary"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("merge --json: %v\n%s", err, r.stdout)
	}
	if m.FirstFailure.Rank == nil || *m.FirstFailure.Rank != 1 || m.FirstFailure.Verdict != "gpu_illegal_memory_access" {
		t.Fatalf("first failure %+v, want rank 1 gpu_illegal_memory_access\n%s", m.FirstFailure, r.stdout)
	}
	for _, rk := range m.Ranks {
		if rk.Rank != nil && *rk.Rank == 0 && (rk.Verdict != "collective_timeout" || !rk.Secondary) {
			t.Fatalf("rank 0: %+v, want a secondary collective_timeout\n%s", rk, r.stdout)
		}
	}
}
