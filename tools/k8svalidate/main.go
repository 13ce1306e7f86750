// Command k8svalidate checks Kubernetes manifests offline against the
// Kubernetes API's own Go types: every document is decoded strictly (an
// unknown or misspelt field, a duplicate field, a value of the wrong type
// or an unparsable quantity is an error) into the type its apiVersion and
// kind name, then checked for what the API server would refuse that the
// types cannot say (names, a selector that does not select the pod
// template, a mount of no volume, a container without an image).
//
// It is its own module so that kcrash's go.mod carries no Kubernetes
// dependency. Usage: go run . FILE.yaml...
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: k8svalidate FILE.yaml...")
		os.Exit(2)
	}
	bad := false
	for _, path := range os.Args[1:] {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			bad = true
			continue
		}
		errs := Validate(data)
		for _, e := range errs {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, e)
		}
		if len(errs) > 0 {
			bad = true
			continue
		}
		fmt.Printf("%s: ok\n", path)
	}
	if bad {
		os.Exit(1)
	}
}
