package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// writeJSONStream prints what writeJSON prints of the decoded document
// (the same value, escaped the same way, indented), in the document's order.
func TestWriteJSONStreamMatchesWriteJSON(t *testing.T) {
	for _, doc := range []string{
		`{"schema_version":1,"z":"\u001b[2J\u009b31m\u202e","a":[1,2.5,-3e2,{"b":null,"c":true}],"e":{},"f":[],"g":[[]],"h":"<b>&"}`,
		`[]`, `"x"`, `null`, `{"k":{"k":{"k":[{"k":"v"}]}}}`,
	} {
		var stream, whole bytes.Buffer
		if err := writeJSONStream(&stream, strings.NewReader(doc)); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		var v any
		json.Unmarshal([]byte(doc), &v)
		if err := writeJSON(&whole, v); err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(stream.Bytes(), &a); err != nil {
			t.Fatalf("%s: printed %s: %v", doc, stream.Bytes(), err)
		}
		json.Unmarshal(whole.Bytes(), &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: printed %s, want the value of %s", doc, stream.Bytes(), whole.Bytes())
		}
		for _, raw := range []string{"\x1b", "\u009b", "\u202e", "<b>"} {
			if strings.Contains(stream.String(), raw) {
				t.Errorf("%s: %q raw in %s", doc, raw, stream.Bytes())
			}
		}
		if doc[0] == '{' && len(doc) < 40 && stream.String() != whole.String() {
			t.Errorf("%s: printed\n%s\nwant\n%s", doc, stream.Bytes(), whole.Bytes())
		}
	}
	if err := writeJSONStream(&bytes.Buffer{}, strings.NewReader(`{"a":[1,`)); err == nil {
		t.Error("a cut document printed without an error")
	}
}
