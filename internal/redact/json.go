package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
)

// JSON masks the secrets in a JSON document's string values before they are
// (re-)encoded: a secret holding & < > " or a control character is encoded as
// \u0026, \", \n... and would no longer match itself in the encoded bytes.
// Object keys are kept; an array of strings is treated as an argv (Args), so
// that "--password", "X" is caught too. The output is indented with two
// spaces, keys in their original order. Not JSON: an error, src untouched.
func (r *Redactor) JSON(src []byte) ([]byte, error) {
	out, _, err := r.JSONCount(src)
	return out, err
}

// JSONCount is JSON that also says how many string values it changed: a
// file with none can be kept byte for byte.
func (r *Redactor) JSONCount(src []byte) ([]byte, int, error) {
	changed := 0
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var out bytes.Buffer
	type frame struct {
		obj      bool
		wantKey  bool
		n        int
		prevFlag bool // the previous array element was a secret-named flag
		envKey   bool // the value being read belongs to a secret-named VARIABLE key
	}
	var stack []frame
	enc := func(v any) {
		b, _ := marshalNoHTML(v)
		out.Write(b)
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			out.WriteByte(byte(d))
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].obj {
				stack[len(stack)-1].wantKey = true
			}
			continue
		}
		// a value or a key
		if top != nil {
			switch {
			case top.obj && top.wantKey:
				if top.n > 0 {
					out.WriteByte(',')
				}
				top.n++
				enc(tok)
				out.WriteByte(':')
				top.wantKey = false
				k, _ := tok.(string)
				top.envKey = envName.MatchString(k) && IsSecretName(k)
				continue
			case !top.obj:
				if top.n > 0 {
					out.WriteByte(',')
				}
				top.n++
			}
		}
		flag := false
		switch v := tok.(type) {
		case json.Delim:
			out.WriteByte(byte(v))
			stack = append(stack, frame{obj: v == '{', wantKey: v == '{'})
			continue
		case string:
			w := v
			switch {
			case top != nil && top.obj && top.envKey && v != "":
				w = Mask // an environment listing: "API_KEY": "abc", however short
			case top != nil && !top.obj && top.prevFlag && v != "" && v[0] != '-':
				w = Mask // the value after --password in an argv
			default:
				w = r.String(v)
			}
			if w != v {
				changed++
			}
			enc(w)
			flag = flagName.MatchString(v)
		case json.Number:
			out.WriteString(v.String())
		default:
			enc(v)
		}
		if top != nil {
			if top.obj {
				top.wantKey = true
			} else {
				top.prevFlag = flag
			}
		}
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, out.Bytes(), "", "  "); err != nil {
		return nil, 0, err
	}
	ind.WriteByte('\n')
	return ind.Bytes(), changed, nil
}

// envName is how an environment variable's name looks (API_KEY, HF_TOKEN).
var envName = regexp.MustCompile(`\A[A-Z][A-Z0-9_]*\z`)

func marshalNoHTML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
