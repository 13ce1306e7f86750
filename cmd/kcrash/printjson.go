package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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

// writeJSONStream prints the JSON document r as writeJSON would print its
// decoded value, keeping the document's key order, token by token: a
// manifest of 16 MiB is printed without being held decoded.
func writeJSONStream(w io.Writer, r io.Reader) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	bw := bufio.NewWriter(w)
	type level struct {
		obj   bool
		items int
	}
	var stack []level
	indent := func() {
		bw.WriteByte('\n')
		for range stack {
			bw.WriteString("  ")
		}
	}
	for {
		t, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok && (d == '}' || d == ']') {
			closed := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if closed.items > 0 {
				indent()
			}
			bw.WriteByte(byte(d))
			continue
		}
		// a value, or an object's key
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			isKey := top.obj && top.items%2 == 0
			if isKey || !top.obj {
				if top.items > 0 {
					bw.WriteByte(',')
				}
				indent()
			}
			top.items++
			if !top.obj {
				top.items++ // arrays count two per item, like a key and its value
			}
		}
		switch v := t.(type) {
		case json.Delim:
			bw.WriteByte(byte(v))
			stack = append(stack, level{obj: v == '{'})
		case string:
			b, _ := json.Marshal(v)
			bw.Write(visible.JSON(b))
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].items%2 == 1 {
				bw.WriteString(": ")
			}
		case json.Number:
			bw.WriteString(v.String())
		case bool:
			fmt.Fprint(bw, v)
		case nil:
			bw.WriteString("null")
		}
	}
	if len(stack) > 0 {
		return io.ErrUnexpectedEOF
	}
	bw.WriteByte('\n')
	return bw.Flush()
}
