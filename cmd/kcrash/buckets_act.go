package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/fleet/drain"
	fleetmetrics "github.com/kcrash/kcrash/fleet/metrics"
)

// bucketsActions is what `kcrash buckets` does with its report beyond
// printing it: drain Slurm nodes, write Prometheus series. Draining is
// opt-in twice (--drain plans, --apply acts), as a remediation should be:
// a wrong class must cost a person a look, not a node.
type bucketsActions struct {
	drain       bool
	apply       bool
	textfileDir string
	slurm       *cluster.Slurm // nil: scontrol from PATH
}

func (a *bucketsActions) flags(f *pflag.FlagSet) {
	f.BoolVar(&a.drain, "drain", false, "say which Slurm nodes hold hardware-suspect GPUs and the drain reason (dry run)")
	f.BoolVar(&a.apply, "apply", false, "with --drain: drain those nodes (scontrol update State=DRAIN)")
	f.StringVar(&a.textfileDir, "textfile-dir", "", "write bucket counts for node_exporter's textfile collector into `DIR`")
}

// run plans (and applies) the drains and writes the metrics, filling rep.
// Its error comes after the report is out: the report is never lost to a
// failed action.
func (a *bucketsActions) run(ctx context.Context, rep *bucketsReport) error {
	var errs []error
	if a.drain {
		if a.slurm == nil {
			a.slurm = &cluster.Slurm{}
		}
		nodes, err := a.slurm.Nodes(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("--drain: %w", err))
		} else {
			rep.Drain = drain.Plan(&rep.Report, nodes)
			if a.apply {
				rep.Applied = true
				if n := drain.Apply(ctx, a.slurm, rep.Drain); n > 0 {
					errs = append(errs, fmt.Errorf("--drain: %d of %d drains failed", n, len(rep.Drain)))
				}
			}
		}
	}
	if a.textfileDir != "" {
		if err := fleetmetrics.WriteFile(a.textfileDir, &rep.Report, fleetmetrics.Options{}); err != nil {
			errs = append(errs, fmt.Errorf("--textfile-dir: %w", err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("buckets: %w", errors.Join(errs...))
	}
	return nil
}

func (a *bucketsActions) check() error {
	if a.apply && !a.drain {
		return usagef("buckets: --apply drains nodes only with --drain")
	}
	return nil
}

// printDrain prints the plan or what was done, one line a host.
func printDrain(s *streams, rep *bucketsReport) {
	if rep.Drain == nil {
		return
	}
	w := s.Out
	if rep.Applied {
		fmt.Fprintf(w, "\ndrain:\n")
	} else {
		fmt.Fprintf(w, "\ndrain (dry run; --apply drains):\n")
	}
	if len(rep.Drain) == 0 {
		fmt.Fprintf(w, "  no hardware-suspect GPU: nothing to drain\n")
	}
	for _, a := range rep.Drain {
		switch {
		case a.Skip != "":
			fmt.Fprintf(w, "  skip %s: %s\n", a.Host, a.Skip)
		case a.Err != "":
			fmt.Fprintf(w, "  FAILED %s: %s\n", a.Node, a.Err)
		case a.Done:
			fmt.Fprintf(w, "  drained %s: %s\n", a.Node, a.Reason)
		default:
			fmt.Fprintf(w, "  would drain %s: scontrol update NodeName=%s State=DRAIN Reason=%q\n", a.Node, a.Node, a.Reason)
		}
	}
}
