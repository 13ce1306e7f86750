// Command gen-kernelapi-log writes a synthetic level-3 SGLang kernel-API log of
// a given size, for bench/kernelapi.sh.
//
//	go run ./bench/gen-kernelapi-log -size 1024 -o /tmp/kapi_4242.log
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/kcrash/kcrash/internal/kapigen"
)

func main() {
	sizeMiB := flag.Int64("size", 1024, "size in MiB")
	out := flag.String("o", "-", "output file (- for stdout)")
	seed := flag.Uint64("seed", 1, "seed of the batch-size sequence")
	layers := flag.Int("layers", 32, "decoder layers per forward pass")
	flag.Parse()

	w := os.Stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := kapigen.Write(bw, kapigen.Options{Size: *sizeMiB << 20, Seed: *seed, Layers: *layers}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := bw.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
