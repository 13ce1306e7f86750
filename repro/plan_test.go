package repro

import (
	"strings"
	"testing"

	"github.com/kcrash/kcrash/configs"
)

func profiles(t *testing.T) map[string]configs.Profile {
	t.Helper()
	ps, err := configs.Profiles(nil)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func envOf(p *Plan) map[string]string {
	m := map[string]string{}
	for _, kv := range p.Env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// An SGLang launch on an AMD GPU (HIP wording in the evidence): rocm-sync,
// level 10 with dumps of the suspect only, CUDA graphs off, the original's
// --env kept and its redacted secret not.
func TestPlanSGLangAMD(t *testing.T) {
	o := &Original{Path: "b.tar.gz", Cwd: "/srv", Profiles: []string{"sglang"}, Verdict: "gpu_page_fault",
		Suspect: "sglang.quant_method.Fp8MoEMethod.apply", Format: "sglang", Vendor: "amd",
		Command: []string{"python3", "-m", "sglang.launch_server", "--model", "m", "--disable-cuda-graph"},
		Set:     map[string]string{"SGLANG_KERNEL_API_LOGDEST": "/tmp/old/x_%i.log", "SGLANG_USE_AITER": "1", "HF_TOKEN": "[REDACTED]"}}
	p, err := NewPlan(o, Options{Times: 3, Out: "/out", Extra: []string{"--tp", "8"}}, profiles(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Profiles, ",") != "sglang,rocm-sync" || p.Level != 10 || !p.SGLang {
		t.Fatalf("plan %+v", p)
	}
	want := "python3 -m sglang.launch_server --model m --disable-cuda-graph --disable-prefill-cuda-graph --tp 8"
	if got := strings.Join(p.Command, " "); got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	env := envOf(p)
	if env["SGLANG_KERNEL_API_DUMP_INCLUDE"] != "sglang.quant_method.Fp8MoEMethod.apply" || env["AMD_SERIALIZE_KERNEL"] != "3" ||
		env["SGLANG_KERNEL_API_LOGLEVEL"] != "10" || env["SGLANG_USE_AITER"] != "1" {
		t.Errorf("env %v", env)
	}
	if _, ok := env["HF_TOKEN"]; ok {
		t.Error("a redacted secret is set from the bundle")
	}
	if _, ok := env["SGLANG_KERNEL_API_LOGDEST"]; ok {
		t.Error("the old run's profile path is set again")
	}
	args := strings.Join(p.RunArgs(2), " ")
	if !strings.HasPrefix(args, "run --out /out/run-2 --workdir /out/run-2/work --profile sglang,rocm-sync --level 10 ") ||
		!strings.HasSuffix(args, " -- "+want) {
		t.Errorf("run args %q", args)
	}
	notes := strings.Join(p.Notes, "\n")
	if !strings.Contains(notes, "HF_TOKEN is not set from the bundle") || !strings.Contains(notes, "rocm-sync") {
		t.Errorf("notes %s", notes)
	}
}

// NVIDIA evidence, a FlashInfer log, a script that is not an SGLang launch,
// a suspect with fnmatch characters; and no vendor at all.
func TestPlanOthers(t *testing.T) {
	o := &Original{Path: "b", Cwd: "/w", Profiles: []string{"none"}, Suspect: "Foo[1].bar*", Format: "flashinfer", Vendor: "nvidia",
		Command: []string{"bash", "run.sh"}}
	p, err := NewPlan(o, Options{}, profiles(t))
	if err != nil {
		t.Fatal(err)
	}
	env := envOf(p)
	if strings.Join(p.Profiles, ",") != "flashinfer,cuda-sync" || env["CUDA_LAUNCH_BLOCKING"] != "1" || env["FLASHINFER_LOGLEVEL"] != "10" ||
		env["FLASHINFER_DUMP_INCLUDE"] != "Foo[[]1].bar[*]" || p.SGLang || strings.Join(p.Command, " ") != "bash run.sh" {
		t.Fatalf("plan %+v env %v", p, env)
	}
	o.Vendor, o.Suspect = "", ""
	p, err = NewPlan(o, Options{}, profiles(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(p.Profiles, ","), "sync") || p.Level != 5 || envOf(p)["FLASHINFER_DUMP_INCLUDE"] != "" {
		t.Fatalf("plan %+v", p)
	}
	if p, _ = NewPlan(o, Options{Vendor: "amd"}, profiles(t)); p.SyncProfile != "rocm-sync" {
		t.Errorf("--vendor amd: %q", p.SyncProfile)
	}
}

func TestIsSGLangLaunch(t *testing.T) {
	for _, c := range []struct {
		argv string
		want bool
	}{
		{"python3 -m sglang.launch_server --model x", true},
		{"python -m sglang.bench_one_batch --batch 1", true},
		{"python3 /opt/sglang/python/sglang/launch_server.py", true},
		{"sglang serve --model-path x", true},
		{"bash run_qwen3.5_mxfp4.sh", false},
		{"python3 -m vllm.entrypoints.openai.api_server", false},
		{"python3 my_sglang.launch_server_wrapper.py", false},
	} {
		if got := isSGLangLaunch(strings.Fields(c.argv)); got != c.want {
			t.Errorf("%q: %v", c.argv, got)
		}
	}
}
