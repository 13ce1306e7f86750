package main

import (
	"os"
	"strings"
	"testing"
)

const manifest = "../../deploy/kubernetes/kcrash-agent-daemonset.yaml"

func TestManifestValid(t *testing.T) {
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if errs := Validate(data); len(errs) != 0 {
		t.Fatalf("%s: %v", manifest, errs)
	}
}

// Broken copies of the real manifest, one mistake each, are refused with
// the mistake named.
func TestBrokenCopiesRefused(t *testing.T) {
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	good := string(data)
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"misspelt field", "mountPath: /run/kcrash", "mountPth: /run/kcrash", `unknown field "mountPth"`},
		{"bad quantity", "memory: 64Mi", "memory: 64Mx", "quantities must match"},
		{"wrong type", "hostPID: true", "hostPID: yes please", "cannot unmarshal"},
		{"selector misses the template", "      labels:\n        app.kubernetes.io/name: kcrash-agent\n        app.kubernetes.io/part-of: kcrash\n    spec:",
			"      labels:\n        app.kubernetes.io/name: kcrash-agnet\n        app.kubernetes.io/part-of: kcrash\n    spec:", "does not match template"},
		{"mount of no volume", "        - name: kmsg\n          hostPath:", "        - name: devkmsg\n          hostPath:", `volumeMounts[2].name: Not found: "kmsg"`},
		{"hostPath type", "type: CharDevice", "type: CharDev", `Unsupported value: "CharDev"`},
		{"toleration effect", "key: amd.com/gpu\n          operator: Exists\n          effect: NoSchedule", "key: amd.com/gpu\n          operator: Exists\n          effect: NoScheduling", `Unsupported value: "NoScheduling"`},
		{"unknown apiVersion", "apiVersion: apps/v1", "apiVersion: apps/v1beta9", "not a type this validator knows"},
		{"no image", "image: ghcr.io/kcrash/kcrash:latest", "image: \"\"", "image: Required value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(good, tc.old) != 1 {
				t.Fatalf("%q occurs %d times in the manifest", tc.old, strings.Count(good, tc.old))
			}
			errs := Validate([]byte(strings.Replace(good, tc.old, tc.new, 1)))
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Errorf("errors %q, want one with %q", all, tc.want)
			}
		})
	}
	if errs := Validate([]byte("# nothing\n---\n")); len(errs) != 1 {
		t.Errorf("an empty stream: %v", errs)
	}
}
