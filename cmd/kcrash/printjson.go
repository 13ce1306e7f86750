package main

import (
	"encoding/json"
	"io"

	"github.com/kcrash/kcrash/internal/visible"
)

// writeJSON prints v as indented JSON with the one escaping rule of every
// output: what encoding/json leaves raw (DEL, C1 controls, bidi overrides)
// is written as \uNNNN too, so that text from a bundle, a log or a server
// never acts on the terminal; the value decodes the same.
func writeJSON(w io.Writer, v any) error {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(visible.JSON(out), '\n'))
	return err
}
