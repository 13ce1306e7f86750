// Package cluster knows the schedulers kcrash runs under: who a rank is, and
// (with Slurm) what became of a job.
package cluster

import (
	"strconv"

	"github.com/kcrash/kcrash/bundle"
)

// Identity reads a rank's identity from Slurm, torchrun or MPI variables
// (SPEC §6). getenv is os.Getenv in production. It returns nil outside any
// scheduler. Slurm wins for the job id; torchrun's RANK wins for the rank when
// both are set, since under `srun torchrun` SLURM_PROCID names the launcher.
func Identity(getenv func(string) string) *bundle.Job {
	num := func(k string) *int {
		v := getenv(k)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil
		}
		return &n
	}
	var j *bundle.Job
	if id := getenv("SLURM_JOB_ID"); id != "" {
		j = &bundle.Job{Scheduler: "slurm", JobID: id, StepID: getenv("SLURM_STEP_ID"),
			Rank: num("SLURM_PROCID"), LocalRank: num("SLURM_LOCALID"), WorldSize: num("SLURM_NTASKS"),
			Node: getenv("SLURMD_NODENAME"), NodeID: getenv("SLURM_NODEID")}
	}
	// torch.distributed's env:// rendezvous (torchrun, accelerate, deepspeed,
	// a hand-written launcher) is RANK with WORLD_SIZE or LOCAL_RANK beside it;
	// RANK alone is too common a name to be taken for a rank.
	if r := num("RANK"); r != nil && (num("LOCAL_RANK") != nil || num("WORLD_SIZE") != nil) || getenv("TORCHELASTIC_RUN_ID") != "" {
		if j == nil {
			j = &bundle.Job{Scheduler: "torchrun", JobID: getenv("TORCHELASTIC_RUN_ID")}
		}
		j.Rank, j.LocalRank = num("RANK"), num("LOCAL_RANK")
		if w := num("WORLD_SIZE"); w != nil {
			j.WorldSize = w
		}
	}
	if j == nil {
		for _, k := range []string{"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"} {
			if r := num(k); r != nil {
				j = &bundle.Job{Scheduler: "mpi", Rank: r, LocalRank: num("OMPI_COMM_WORLD_LOCAL_RANK"), WorldSize: firstNum(num, "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")}
				break
			}
		}
	}
	return j
}

func firstNum(num func(string) *int, keys ...string) *int {
	for _, k := range keys {
		if n := num(k); n != nil {
			return n
		}
	}
	return nil
}

// RankSuffix is the rank for a bundle name ("" outside a multi-rank job).
func RankSuffix(j *bundle.Job) string {
	if j == nil || j.Rank == nil {
		return ""
	}
	return strconv.Itoa(*j.Rank)
}
