package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kcrash/kcrash/agent"
	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
)

type agentOptions struct {
	IO          *streams
	Socket      string
	State       string
	TextfileDir string
	Kmsg        string
	MaxBytes    byteSize
	MaxAge      time.Duration
	GPUInterval time.Duration
	NoGPU       bool
	Verbose     bool
}

func init() { register(func(s *streams) *cobra.Command { return newAgentCmd(s, nil) }) }

func newAgentCmd(s *streams, runF func(*agentOptions) error) *cobra.Command {
	o := &agentOptions{IO: s, MaxBytes: 256 << 20}
	c := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: kernel messages and GPU samples for unprivileged kcrash runs",
		Long: `kcrash agent is the privileged half of kcrash on a node (run it as root, from
configs/systemd/kcrash-agent.service or deploy/kubernetes/kcrash-agent-daemonset.yaml).
It follows the kernel's message ring into a bounded journal on disk, samples the GPUs
once for the whole node, and answers kcrash run, attach, collect and doctor of any user
on its unix socket with the records that concern that user's own processes, job and
GPUs (decided from the socket's peer credentials, never from what a client claims).
With --textfile-dir it writes kcrash.prom for node_exporter's textfile collector.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(o)
			}
			return agentRun(o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Socket, "socket", api.DefaultSocket, "the unix socket clients find the agent at (`PATH`; they read $"+api.SocketEnv+")")
	f.StringVar(&o.State, "state", agent.DefaultState, "`DIR` of the kernel-message journal and its cursor")
	f.StringVar(&o.TextfileDir, "textfile-dir", "", "write kcrash.prom into node_exporter's textfile `DIR`")
	f.StringVar(&o.Kmsg, "kmsg", "/dev/kmsg", "the kernel's message ring (`PATH`)")
	f.Var(&o.MaxBytes, "journal-max-bytes", "drop the journal's oldest records past this `SIZE`")
	f.DurationVar(&o.MaxAge, "journal-max-age", 7*24*time.Hour, "drop journal records older than this")
	f.DurationVar(&o.GPUInterval, "gpu-interval", 2*time.Second, "the node's GPU sampling period")
	f.BoolVar(&o.NoGPU, "no-gpu", false, "do not sample the GPUs")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "log each access decision")
	return c
}

func agentRun(o *agentOptions) error {
	level := slog.LevelInfo
	if o.Verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(o.IO.Err, &slog.HandlerOptions{Level: level}))
	// One P, unless the operator chose GOMAXPROCS: the agent's work is one
	// pass over the ring a second and a scan of /proc every second second,
	// never parallel. With more Ps each wakeup also woke idle threads that
	// spun looking for work to steal, and the runtime's monitor thread
	// kept polling while any P was out of the idle list: under a flood that
	// was about a quarter of what following the ring cost (perf).
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	gpu := o.GPUInterval
	if o.NoGPU {
		gpu = -1
	}
	err := agent.Run(ctx, agent.Config{
		Socket: o.Socket, State: o.State, TextfileDir: o.TextfileDir, Kmsg: o.Kmsg,
		Journal:     journal.Limits{MaxBytes: int64(o.MaxBytes), MaxAge: o.MaxAge},
		GPUInterval: gpu, Version: version, Logger: log,
		Ready: func() { sdNotify("READY=1") },
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	sdNotify("STOPPING=1")
	return nil
}

// sdNotify tells systemd (Type=notify) how the agent is: a datagram to
// $NOTIFY_SOCKET, as sd_notify(3) sends it. Nothing without that variable.
func sdNotify(state string) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:] // an abstract socket
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}
