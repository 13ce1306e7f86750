package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kcrash/kcrash/internal/jsonstream"
)

// What a reader keeps of a manifest's open-ended fields. A manifest may be
// 16 MiB (MaxManifest) of notes, environment or findings; decoded whole it
// takes several times that, past the 64 MiB a reader promises. kcrash's
// own manifests stay far inside these; what is left out is said in Notes.
const (
	manifestValueMax = 4 << 20   // one value (a string, a finding, the host)
	listKeptBytes    = 256 << 10 // of one list or map: notes, an env map, the command
	listKeptItems    = 2000
	findingsKept     = 1 << 20 // of the triage's findings
)

// bounded are the fields DecodeManifest reads with limits; the rest is
// decoded as is (each within manifestValueMax).
var bounded = map[string]bool{"command": true, "env": true, "triage": true, "collectors": true, "truncated": true, "notes": true}

// DecodeManifest decodes raw (manifest.json) into m keeping at most the limits above of
// its lists and maps, noting what it left out.
func DecodeManifest(raw []byte, m *Manifest) error {
	s := jsonstream.New(bytes.NewReader(raw), manifestValueMax, MaxManifest+1)
	var rest bytes.Buffer
	rest.WriteByte('{')
	var left []string
	cut := func(what string, n int) {
		if n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, what))
		}
	}
	err := s.Object(func(key string) error {
		if !bounded[key] {
			var v json.RawMessage
			if err := s.Decode(&v); err != nil {
				return err
			}
			k, _ := json.Marshal(key)
			if rest.Len() > 1 {
				rest.WriteByte(',')
			}
			rest.Write(k)
			rest.WriteByte(':')
			rest.Write(v)
			return nil
		}
		var n int
		var err error
		switch key {
		case "command":
			m.Command, n, err = keepList[string](s, listKeptItems, listKeptBytes)
			cut("command arguments", n)
		case "collectors":
			m.Collectors, n, err = keepList[CollectorStatus](s, listKeptItems, listKeptBytes)
			cut("collector statuses", n)
		case "truncated":
			m.Truncated, n, err = keepList[string](s, listKeptItems, listKeptBytes)
			cut("truncated files", n)
		case "notes":
			m.Notes, n, err = keepList[string](s, listKeptItems, listKeptBytes)
			cut("notes", n)
		case "env":
			err = s.Object(func(k string) error {
				var n int
				var err error
				switch k {
				case "profiles":
					m.Env.Profiles, n, err = keepList[string](s, listKeptItems, listKeptBytes)
				case "set":
					m.Env.Set, n, err = keepMap(s)
				case "kept":
					m.Env.Kept, n, err = keepMap(s)
				case "user":
					m.Env.User, n, err = keepMap(s)
				default:
					return s.Skip()
				}
				cut("env."+k+" entries", n)
				return err
			})
		case "triage":
			m.Triage, n, err = keepTriage(s)
			cut("triage findings", n)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, jsonstream.ErrValueTooLarge) {
			return fmt.Errorf("a value larger than %d MiB, more than any kcrash manifest holds", manifestValueMax>>20)
		}
		return err
	}
	rest.WriteByte('}')
	if err := json.Unmarshal(rest.Bytes(), m); err != nil {
		return err
	}
	for _, l := range left {
		m.Notes = append(m.Notes, "manifest.json: "+l+" more than a reader keeps, left out")
	}
	return nil
}

// keepList decodes an array keeping its first items, up to items and
// bytes (of their JSON), and counts the others.
func keepList[T any](s *jsonstream.Stream, items, bytes int) ([]T, int, error) {
	var out []T
	left, size := 0, 0
	err := s.Array(func() error {
		var raw json.RawMessage
		if err := s.Decode(&raw); err != nil {
			return err
		}
		if len(out) == items || size+len(raw) > bytes {
			left++
			return nil
		}
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		size += len(raw)
		out = append(out, v)
		return nil
	})
	return out, left, err
}

// keepMap decodes an object of strings keeping its first entries.
func keepMap(s *jsonstream.Stream) (map[string]string, int, error) {
	var out map[string]string
	left, size := 0, 0
	err := s.Object(func(k string) error {
		var v string
		if err := s.Decode(&v); err != nil {
			return err
		}
		if len(out) == listKeptItems || size+len(k)+len(v) > listKeptBytes {
			left++
			return nil
		}
		if out == nil {
			out = map[string]string{}
		}
		size += len(k) + len(v)
		out[k] = v
		return nil
	})
	return out, left, err
}

// keepTriage re-encodes the triage object keeping its first findings (up
// to findingsKept bytes): the rest of it as is. A triage that is not an
// object is kept as its first token: no reader takes it anyway.
func keepTriage(s *jsonstream.Stream) (json.RawMessage, int, error) {
	t, err := s.Token()
	if err != nil {
		return nil, 0, err
	}
	switch t {
	case json.Delim('{'):
	case json.Delim('['):
		for depth := 1; depth > 0; {
			t, err := s.Token()
			if err != nil {
				return nil, 0, err
			}
			switch t {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
		}
		return json.RawMessage("[]"), 0, nil
	default:
		v, err := json.Marshal(t)
		return v, 0, err
	}
	var b bytes.Buffer
	left := 0
	b.WriteByte('{')
	err = s.ObjectBody(func(k string) error {
		kj, _ := json.Marshal(k)
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(kj)
		b.WriteByte(':')
		if k != "findings" {
			var v json.RawMessage
			if err := s.Decode(&v); err != nil {
				return err
			}
			b.Write(v)
			return nil
		}
		kept, size := 0, 0
		b.WriteByte('[')
		err := s.Array(func() error {
			var v json.RawMessage
			if err := s.Decode(&v); err != nil {
				return err
			}
			if size+len(v) > findingsKept {
				left++
				return nil
			}
			if kept > 0 {
				b.WriteByte(',')
			}
			kept++
			size += len(v)
			b.Write(v)
			return nil
		})
		b.WriteByte(']')
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	b.WriteByte('}')
	return json.RawMessage(b.Bytes()), left, nil
}
