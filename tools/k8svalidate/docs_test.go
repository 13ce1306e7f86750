package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// installDoc holds the Kubernetes recipe's pod spec, as users copy it.
const installDoc = "../../docs/install.md"

var yamlBlock = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```")

// docManifests are the YAML blocks of docs/install.md that are Kubernetes
// objects (the others are kcrash's own config).
func docManifests(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range yamlBlock.FindAllStringSubmatch(string(data), -1) {
		if strings.Contains(m[1], "\napiVersion:") || strings.HasPrefix(m[1], "apiVersion:") {
			out = append(out, m[1])
		}
	}
	return out
}

func TestDocPodSpecValid(t *testing.T) {
	docs := docManifests(t)
	var pods int
	for _, d := range docs {
		if strings.Contains(d, "\nkind: Pod\n") {
			pods++
		}
		if errs := Validate([]byte(d)); len(errs) != 0 {
			t.Errorf("%s: %v\n%s", installDoc, errs, d)
		}
	}
	if pods != 1 {
		t.Errorf("%s: %d pod specs, want the Kubernetes recipe's one", installDoc, pods)
	}
}

// Broken copies of the doc's pod spec are refused with the mistake named.
func TestDocPodSpecBrokenCopiesRefused(t *testing.T) {
	var good string
	for _, d := range docManifests(t) {
		if strings.Contains(d, "\nkind: Pod\n") {
			good = d
		}
	}
	if good == "" {
		t.Fatalf("no pod spec in %s", installDoc)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"restart policy", "restartPolicy: Never", "restartPolicy: Sometimes", `Unsupported value: "Sometimes"`},
		{"termination message policy", "terminationMessagePolicy: FallbackToLogsOnError", "terminationMessagePolicy: FallbackToLogs", `Unsupported value: "FallbackToLogs"`},
		{"misspelt field", "terminationMessagePath: /dev/termination-log", "terminationMessageFile: /dev/termination-log", `unknown field "terminationMessageFile"`},
		{"mount of no volume", "- name: kcrash-agent\n          mountPath:", "- name: kcrash-agnet\n          mountPath:", `Not found: "kcrash-agnet"`},
		{"bad quantity", "sizeLimit: 16Gi", "sizeLimit: 16GB!", "quantities must match"},
		{"command not a list", `command: ["/usr/local/bin/kcrash", "run", "--out", "/kcrash-bundles", "--"]`, `command: /usr/local/bin/kcrash run --`, "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(good, tc.old) != 1 {
				t.Fatalf("%q occurs %d times in the pod spec", tc.old, strings.Count(good, tc.old))
			}
			var all []string
			for _, e := range Validate([]byte(strings.Replace(good, tc.old, tc.new, 1))) {
				all = append(all, e.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Errorf("errors %q, want one with %q", all, tc.want)
			}
		})
	}
}
