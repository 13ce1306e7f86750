// Command kernelapi-analyze runs kernelapi.Analyze on its arguments and
// prints the report as JSON: the analyzer alone, without the rest of
// `kcrash triage`, for bench/kernelapi.sh.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/kcrash/kcrash/kernelapi"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kernelapi-analyze FILE...")
		os.Exit(2)
	}
	rep, err := kernelapi.Analyze(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
